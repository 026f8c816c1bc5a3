package tlsconf

import (
	"crypto/tls"
	"errors"
	"slices"
	"strings"
)

// openSSLNames are OpenSSL's names for the TLS 1.0-1.2 suites Go
// implements.
var openSSLNames = map[string]uint16{
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-ECDSA-AES128-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
	"ECDHE-RSA-AES128-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
	"ECDHE-ECDSA-AES256-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
	"ECDHE-RSA-AES256-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	"ECDHE-ECDSA-AES128-SHA256":     tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256,
	"ECDHE-RSA-AES128-SHA256":       tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
	"AES128-GCM-SHA256":             tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES256-GCM-SHA384":             tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
	"AES128-SHA":                    tls.TLS_RSA_WITH_AES_128_CBC_SHA,
	"AES256-SHA":                    tls.TLS_RSA_WITH_AES_256_CBC_SHA,
	"AES128-SHA256":                 tls.TLS_RSA_WITH_AES_128_CBC_SHA256,
	"DES-CBC3-SHA":                  tls.TLS_RSA_WITH_3DES_EDE_CBC_SHA,
	"ECDHE-RSA-DES-CBC3-SHA":        tls.TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA,
	"RC4-SHA":                       tls.TLS_RSA_WITH_RC4_128_SHA,
	"ECDHE-ECDSA-RC4-SHA":           tls.TLS_ECDHE_ECDSA_WITH_RC4_128_SHA,
	"ECDHE-RSA-RC4-SHA":             tls.TLS_ECDHE_RSA_WITH_RC4_128_SHA,
}

// suiteByName finds a TLS 1.0-1.2 suite by its OpenSSL or IANA name.
func suiteByName(name string) (uint16, bool) {
	if id, ok := openSSLNames[strings.ToUpper(name)]; ok {
		return id, true
	}
	for _, s := range slices.Concat(tls.CipherSuites(), tls.InsecureCipherSuites()) {
		if strings.EqualFold(s.Name, name) && !slices.Equal(s.SupportedVersions, []uint16{tls.VersionTLS13}) {
			return s.ID, true
		}
	}
	return 0, false
}

// cipherClasses are OpenSSL's keywords, as the suites Go implements that
// each stands for (the name's parts are IANA's: TLS_ECDHE_RSA_WITH_...).
var cipherClasses = map[string]func(s *tls.CipherSuite) bool{
	// Go's own default: forward-secret, no known weakness.
	"DEFAULT": func(s *tls.CipherSuite) bool { return !s.Insecure && !strings.HasPrefix(s.Name, "TLS_RSA_") },
	"HIGH":    func(s *tls.CipherSuite) bool { return !isMedium(s) },
	"MEDIUM":  isMedium,
	"ALL":     func(*tls.CipherSuite) bool { return true },
	"COMPLEMENTOFDEFAULT": func(s *tls.CipherSuite) bool {
		return s.Insecure || strings.HasPrefix(s.Name, "TLS_RSA_")
	},
	"RC4":      func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_RC4_") },
	"3DES":     func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_3DES_") },
	"KRSA":     func(s *tls.CipherSuite) bool { return strings.HasPrefix(s.Name, "TLS_RSA_") },
	"RSA":      func(s *tls.CipherSuite) bool { return strings.HasPrefix(s.Name, "TLS_RSA_") },
	"ARSA":     func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_RSA_") },
	"ECDHE":    func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_ECDHE_") },
	"EECDH":    func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_ECDHE_") },
	"KECDHE":   func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_ECDHE_") },
	"ECDSA":    func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_ECDSA_") },
	"AECDSA":   func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_ECDSA_") },
	"AES":      func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_AES_") },
	"AES128":   func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_AES_128_") },
	"AES256":   func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_AES_256_") },
	"AESGCM":   func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_GCM_") },
	"CHACHA20": func(s *tls.CipherSuite) bool { return strings.Contains(s.Name, "_CHACHA20_") },
	"SHA1":     func(s *tls.CipherSuite) bool { return strings.HasSuffix(s.Name, "_SHA") },
	"SHA":      func(s *tls.CipherSuite) bool { return strings.HasSuffix(s.Name, "_SHA") },
	"SHA256":   func(s *tls.CipherSuite) bool { return strings.HasSuffix(s.Name, "_SHA256") },
	"SHA384":   func(s *tls.CipherSuite) bool { return strings.HasSuffix(s.Name, "_SHA384") },
	"TLSV1.2":  func(s *tls.CipherSuite) bool { return !slices.Contains(s.SupportedVersions, tls.VersionTLS11) },
	"TLSV1":    func(s *tls.CipherSuite) bool { return slices.Contains(s.SupportedVersions, tls.VersionTLS10) },
	"SSLV3":    func(s *tls.CipherSuite) bool { return slices.Contains(s.SupportedVersions, tls.VersionTLS10) },
}

// Classes with no suite Go implements.
var emptyClasses = []string{"LOW", "EXPORT", "ANULL", "ENULL", "NULL", "MD5", "DES", "DSS", "PSK", "SRP",
	"CAMELLIA", "ARIA", "SEED", "IDEA", "ADH", "AECDH", "DHE", "EDH", "KDHE", "AESCCM", "AESCCM8", "CCM"}

// isMedium: OpenSSL 1.1 moved RC4 and 3DES down to MEDIUM.
func isMedium(s *tls.CipherSuite) bool {
	return strings.Contains(s.Name, "_RC4_") || strings.Contains(s.Name, "_3DES_")
}

// cipherClass returns the suites an OpenSSL keyword stands for, among
// the TLS 1.0-1.2 suites Go implements.
func cipherClass(word string) ([]uint16, bool) {
	word = strings.ToUpper(word)
	if slices.Contains(emptyClasses, word) {
		return []uint16{}, true
	}
	keep, ok := cipherClasses[word]
	if !ok {
		return nil, false
	}
	var out []uint16
	for _, s := range slices.Concat(tls.CipherSuites(), tls.InsecureCipherSuites()) {
		if !slices.Contains(s.SupportedVersions, tls.VersionTLS13) && keep(s) {
			out = append(out, s.ID)
		}
	}
	return out, true
}

// ParseCiphers reads tls-ciphers: OpenSSL's cipher list, in the part of
// its language that means something to Go's TLS. Names of suites Go does
// not implement are skipped, as OpenSSL skips names it does not know; a
// list with no suite left is an error, as in OpenSSL.
func ParseCiphers(s string) ([]uint16, error) {
	var on, off []uint16
	for _, tok := range strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		remove := false
		switch tok[0] {
		case '!', '-':
			tok, remove = tok[1:], true
		case '+':
			tok = tok[1:] // moves suites to the end: Go ignores order
		case '@':
			continue // @STRENGTH, @SECLEVEL=n: OpenSSL's ordering and policy
		}
		var ids []uint16
		for i, part := range strings.Split(tok, "+") { // ECDHE+AESGCM: the suites in both
			var got []uint16
			if id, ok := suiteByName(part); ok {
				got = []uint16{id}
			} else if cls, ok := cipherClass(part); ok {
				got = cls
			}
			if i == 0 {
				ids = got
			} else {
				ids = slices.DeleteFunc(ids, func(id uint16) bool { return !slices.Contains(got, id) })
			}
		}
		if remove {
			off = append(off, ids...)
		} else {
			on = append(on, ids...)
		}
	}
	var out []uint16
	for _, id := range on {
		if !slices.Contains(off, id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cipher suite that Go's TLS implements")
	}
	return out, nil
}

// tls13Names are the TLS 1.3 suites OpenSSL knows; Go implements the
// first three.
var tls13Names = map[string]uint16{
	"TLS_AES_128_GCM_SHA256":       tls.TLS_AES_128_GCM_SHA256,
	"TLS_AES_256_GCM_SHA384":       tls.TLS_AES_256_GCM_SHA384,
	"TLS_CHACHA20_POLY1305_SHA256": tls.TLS_CHACHA20_POLY1305_SHA256,
	"TLS_AES_128_CCM_SHA256":       0,
	"TLS_AES_128_CCM_8_SHA256":     0,
}

// ParseCipherSuites reads tls-ciphersuites: TLS 1.3 suite names separated
// by ':'. As in OpenSSL, unknown names are skipped and a list without a
// known one is an error. Names OpenSSL knows and Go lacks (the CCM suites)
// leave an empty list when alone, which allows no TLS 1.3 at all.
func ParseCipherSuites(s string) ([]uint16, error) {
	out := []uint16{}
	known := false
	for _, tok := range strings.Split(s, ":") {
		id, ok := tls13Names[strings.ToUpper(tok)]
		if !ok {
			continue
		}
		known = true
		if id != 0 && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if !known {
		return nil, errors.New("no cipher match")
	}
	return out, nil
}
