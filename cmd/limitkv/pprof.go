//go:build pprof

// Profiling builds (go build -tags pprof) serve net/http/pprof on the address
// in LIMITKV_PPROF, so the optimisation work on the request path can look at
// a running server under load; release builds carry none of it.
package main

import (
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("LIMITKV_PPROF")
	if addr == "" {
		return
	}
	go func() {
		if err := http.ListenAndServe(addr, nil); err != nil {
			slog.Error("pprof listener", "err", err)
		}
	}()
}
