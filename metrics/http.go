package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/limitkv/limitkv/commands"
)

// Handler returns the /metrics handler for srv: its collector, and the Go
// runtime's and the process's (go_*, process_*). At most two scrapes run
// at once; more get 503 rather than piling up.
func Handler(srv *commands.Server, log *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		NewCollector(srv),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		MaxRequestsInFlight: 2,
		Timeout:             10 * time.Second,
	})
}

// Endpoint is the metrics HTTP server, on a listener of its own.
type Endpoint struct {
	ln   net.Listener
	http *http.Server
	log  *slog.Logger
}

// Listen opens addr ("host:port") for the metrics of srv. Nothing is
// served until Serve.
func Listen(addr string, srv *commands.Server, log *slog.Logger) (*Endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(srv, log))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("limitkv metrics: /metrics\n"))
	})
	return &Endpoint{
		ln:  ln,
		log: log,
		http: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    16 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
	}, nil
}

// Addr is the address the endpoint listens on.
func (e *Endpoint) Addr() net.Addr { return e.ln.Addr() }

// Serve serves until Shutdown.
func (e *Endpoint) Serve() error {
	if err := e.http.Serve(e.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops the endpoint, waiting for scrapes under way until ctx
// ends.
func (e *Endpoint) Shutdown(ctx context.Context) error { return e.http.Shutdown(ctx) }
