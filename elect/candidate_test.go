package elect

import "testing"

func TestCandidate(t *testing.T) {
	for holder, want := range map[string]string{
		"C1 node-a":               "node-a", // elect/sqllease
		"12 C1 node-a":            "node-a", // elect/redis
		"12 C1 node a":            "node a", // a name with a space
		"C1 node a":               "node a",
		"usurper":                 "usurper", // no campaign id
		"12":                      "12",
		"":                        "",
		"host:4242":               "host:4242",
		"ABCDEFGH23456789 h:4242": "h:4242",
	} {
		if got := Candidate(holder); got != want {
			t.Errorf("Candidate(%q) = %q, want %q", holder, got, want)
		}
	}
}
