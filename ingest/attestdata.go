package ingest

import (
	"encoding/json"
	"strings"
)

// commonKeys are the data_json keys of AttestationCommon, in the order of its fields.
var commonKeys = [...]string{
	"attestation_name", "origin_url", "description", "artifact_fingerprint", "target_artifacts",
	"git_commit_info", "repo_info", "external_urls", "annotations",
}

// decodeAttestationData decodes an attestation's data_json in one pass over its bytes: its
// values as raw JSON, and the common fields from those values. Decoding the whole body into
// AttestationCommon as well was a second pass over every byte of user_data. The result and every error are what decoding raw into
// AttestationCommon and into the map would give: whenever this path could differ (a key that
// matches a common field only regardless of case, as encoding/json matches keys, or any
// error), it decodes the whole body into AttestationCommon instead.
func decodeAttestationData(raw []byte) (AttestationCommon, map[string]json.RawMessage, error) {
	var common AttestationCommon
	var fields map[string]json.RawMessage
	if err := decodeJSONPart("data_json", raw, &fields); err != nil {
		if cerr := decodeJSONPart("data_json", raw, &common); cerr != nil {
			return common, nil, cerr // the error the body always got
		}
		return common, nil, err
	}
	if foldedCommonKey(fields) {
		err := decodeJSONPart("data_json", raw, &common)
		return common, fields, err
	}
	// The common fields alone, as an object: a few small values (user_data is not among them).
	sub := []byte{'{'}
	for _, k := range commonKeys {
		v, ok := fields[k]
		if !ok {
			continue
		}
		if len(sub) > 1 {
			sub = append(sub, ',')
		}
		sub = append(append(append(append(sub, '"'), k...), '"', ':'), v...)
	}
	sub = append(sub, '}')
	if err := decodeJSONPart("data_json", sub, &common); err != nil {
		// Type errors: decode the whole body so that the first one in the body's order is named.
		common = AttestationCommon{}
		err = decodeJSONPart("data_json", raw, &common)
		return common, fields, err
	}
	return common, fields, nil
}

// foldedCommonKey reports whether a key of fields matches a common key only regardless of case.
func foldedCommonKey(fields map[string]json.RawMessage) bool {
	for k := range fields {
		for _, c := range commonKeys {
			if k != c && strings.EqualFold(k, c) {
				return true
			}
		}
	}
	return false
}
