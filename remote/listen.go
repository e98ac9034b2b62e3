package remote

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// ListenGuard reports whether the executor endpoint may serve on addr (host:port, as
// given to net.Listen) with secret. With a non-empty secret every address is allowed
// (NewVerifier checks the secret's strength). Without one it returns an error wrapping
// ErrInsecureListen unless the host is loopback: "localhost", an address in
// 127.0.0.0/8, or ::1. An empty host, 0.0.0.0 and :: listen on every interface and are
// refused, as is any other host name, which cannot be known to stay local.
func ListenGuard(addr string, secret []byte) error {
	if len(secret) > 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ax: remote: listen guard: %w: %w", ErrInsecureListen, err)
	}
	if !isLoopback(host) {
		return fmt.Errorf("ax: remote: listen guard: %w: %q", ErrInsecureListen, addr)
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return ip.WithZone("").Unmap().IsLoopback()
}
