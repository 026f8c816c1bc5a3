// Package tests holds the black-box tests: each builds the limitkv binary,
// starts it on free loopback ports (internal/testserver), and talks to it
// as users do, with go-redis, raw RESP, redis-cli and the other real
// clients, beside a real redis-server where a reply must match Redis's
// byte for byte (testdata/diff). It also checks what holds the repository
// together: the import boundaries between packages and the links of the
// documentation.
package tests
