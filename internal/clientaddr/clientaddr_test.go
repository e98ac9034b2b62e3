package clientaddr

import (
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:5678":                  "192.0.2.1",
		"[::ffff:192.0.2.1]:80":           "192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:443":      "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1%eth0]:443": "2001:db8:1:2::/64",
		"[::1]:1":                         "::/64",
		"pipe":                            "pipe",
		strings.Repeat("x", 100):          strings.Repeat("x", 64),
	} {
		if got := Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
	}
	if Key("[2001:db8:1:2::a]:1") != Key("[2001:db8:1:2::b]:2") {
		t.Error("two addresses of one /64 are two clients")
	}
}
