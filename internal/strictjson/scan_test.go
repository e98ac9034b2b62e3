package strictjson

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// scanTarget exercises what the scanner follows: struct fields by name, maps, slices,
// interfaces, and opaque values.
type scanTarget struct {
	ID     int               `json:"id"`
	Name   string            `json:"name"`
	Tasks  []store.Task      `json:"tasks"`
	Labels map[string]int    `json:"labels"`
	Any    any               `json:"any"`
	At     time.Time         `json:"at"`
	Raw    json.RawMessage   `json:"raw"`
	Deep   map[string][]*any `json:"deep"`
}

// FuzzScannerAgreesWithWalker: on every input encoding/json finds well formed, the
// scanner refuses exactly what the walker refuses, with the same message, in both
// modes. (Malformed input goes to the walker.)
func FuzzScannerAgreesWithWalker(f *testing.F) {
	for _, seed := range []string{`{}`, `{"id":1,"id":2}`, `{"ID":1}`, `{"tasks":[{"ID":1,"ID":1}]}`, `{"tasks":[{"id":1}]}`,
		`{"labels":{"a":1,"a":2}}`, `{"any":{"x":[{"y":1,"y":2}]}}`, `{"raw":{"a":1,"a":1}}`, `{"extra":{"a":[1,{"b":2}]},"name":"n"}`,
		`{"deep":{"k":[{"a":1,"\u0061":2}]}}`, `{"n\u0061me":"x","name":"y"}`, ` [ ] `, `"x"`, `{"at":"2026-01-01T00:00:00Z","at":null}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		ty := reflect.TypeFor[scanTarget]()
		for _, extensible := range []bool{false, true} {
			s := &scanner{data: []byte(in), extensible: extensible}
			serr := s.check(ty)
			werr := walk([]byte(in), ty, extensible)
			if serr == errMalformed || (serr == nil) != (werr == nil) || (serr != nil && serr.Error() != werr.Error()) {
				t.Fatalf("check(%q, extensible %v): scanner %v, walker %v", in, extensible, serr, werr)
			}
		}
	})
}
