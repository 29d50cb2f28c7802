package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/veritrail/veritrail/internal/store"
)

// evidence downloads an attestation's evidence file. Like the API's getEvidence it needs a key of
// the organization, even in a public one, and the attestation must belong to the trail of the path.
func (s *Site) evidence(w http.ResponseWriter, r *http.Request) {
	p, sess, signedIn, ok := s.authorize(w, r, private)
	if !ok {
		return
	}
	ctx := r.Context()
	att, err := s.store.AttestationByID(ctx, p.Org.ID, param(r, "id"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && att.EvidenceSHA256 == "") || s.blobs == nil {
		s.notFoundPage(w, signedIn, sess)
		return
	}
	if err != nil {
		s.fail(w, r, "look up attestation", err)
		return
	}
	f, err := s.store.FlowByName(ctx, p.Org.ID, param(r, "flow"))
	if err == nil && f.ID == att.FlowID {
		var t store.Trail
		if t, err = s.store.TrailByName(ctx, f.ID, param(r, "trail")); err == nil && t.ID != att.TrailID {
			err = store.ErrNotFound
		}
	} else if err == nil {
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		s.notFoundPage(w, signedIn, sess)
		return
	}
	if err != nil {
		s.fail(w, r, "look up trail", err)
		return
	}
	b, err := s.blobs.Get(ctx, att.EvidenceSHA256)
	if err != nil {
		s.fail(w, r, "read evidence", fmt.Errorf("evidence %s: %w", att.EvidenceSHA256, err))
		return
	}
	h := w.Header()
	// A download, never a page of this site: an HTML file of evidence must not run here.
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", att.EvidenceName))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
