// Package clientaddr names the client a request came from, for counting and logging
// per client: one key per IPv4 address, and per IPv6 /64, which is what one host
// usually holds (a host that rotates addresses within it is still one client).
package clientaddr

import (
	"net"
	"net/netip"
)

// maxOther bounds the key of an address that is not an IP address.
const maxOther = 64

// Key is the key of remoteAddr, an http.Request's RemoteAddr ("host:port"): its IPv4
// address (an IPv4-mapped IPv6 one unmapped), its IPv6 address's /64, or, for what is
// not an IP address, its first 64 bytes.
func Key(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return host[:min(len(host), maxOther)]
	case ip.Is4() || ip.Is4In6():
		return ip.Unmap().String()
	}
	p, _ := ip.WithZone("").Prefix(64)
	return p.String()
}
