package ingest

import (
	"regexp"
)

// Patterns of the interface specification.
const (
	flowNamePattern    = `^[a-zA-Z0-9][a-zA-Z0-9\.\-_~]*$`
	trailNamePattern   = `^[a-zA-Z0-9][a-zA-Z0-9\-_.~]*$`
	fingerprintPattern = `^[a-f0-9]{64}$`
	gitCommitPattern   = `^[a-f0-9]{40}$`
	templateRefPattern = `^[a-zA-Z0-9\-_]+$`
	shortFPPattern     = `^[a-f0-9]{5,64}$`
	typeNamePattern    = `^[a-zA-Z0-9][a-zA-Z0-9\-_.]*$`
)

var (
	flowNameRE    = regexp.MustCompile(flowNamePattern)
	trailNameRE   = regexp.MustCompile(trailNamePattern)
	fingerprintRE = regexp.MustCompile(fingerprintPattern)
	gitCommitRE   = regexp.MustCompile(gitCommitPattern)
	templateRefRE = regexp.MustCompile(templateRefPattern)
	shortFPRE     = regexp.MustCompile(shortFPPattern)
	typeNameRE    = regexp.MustCompile(typeNamePattern)
)

// checker collects every field error of a request so the caller hears about all of them at once.
type checker map[string]string

func (c checker) required(field, v string) bool {
	if v == "" {
		c[field] = "Field required"
		return false
	}
	return true
}

func (c checker) match(field, v string, re *regexp.Regexp, pattern string) {
	if !re.MatchString(v) {
		c[field] = patternError(pattern, v)
	}
}

// matchOptional checks a value only when it is given.
func (c checker) matchOptional(field string, v *string, re *regexp.Regexp, pattern string) {
	if v != nil && *v != "" {
		c.match(field, *v, re, pattern)
	}
}

func (c checker) err() error {
	if len(c) == 0 {
		return nil
	}
	return validationFailed(c)
}

const shortHexPattern = `^[a-f0-9]{5,64}$`

var shortHexRE = shortFPRE
