package admin

import (
	"fmt"
	"net/url"
	"strings"
)

// The bounds of a query string (GET /tasks, GET /audit): longer, or with more
// parameters, it is 400 invalid before it is parsed.
const (
	MaxQueryBytes  = 16 << 10
	MaxQueryParams = 64
)

// readQuery reads the query string raw of a route that takes the parameters params.
// It refuses a query string over MaxQueryBytes or MaxQueryParams, a malformed one,
// an unknown parameter, and a parameter given twice with different values but list,
// whose values it keeps as given: a repeated parameter with one value is that value.
func readQuery(raw string, params map[string]bool, list string) (url.Values, error) {
	if len(raw) > MaxQueryBytes {
		return nil, fmt.Errorf("the query string is over %d bytes", MaxQueryBytes)
	}
	if n := strings.Count(raw, "&") + 1; n > MaxQueryParams {
		return nil, fmt.Errorf("the query string has %d parameters, over %d", n, MaxQueryParams)
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("the query string is malformed: %v", err)
	}
	for name, vals := range v {
		if !params[name] {
			return nil, fmt.Errorf("unknown parameter %s", quoteShort(name))
		}
		if name == list {
			continue
		}
		for _, val := range vals[1:] {
			if val != vals[0] {
				return nil, fmt.Errorf("parameter %s given with different values", name)
			}
		}
		v[name] = vals[:1]
	}
	return v, nil
}
