package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/netip"
	"time"

	"github.com/limitkv/limitkv/client"
	"github.com/redis/go-redis/v9"
)

// Three SMS per hour and ten per day per phone number, on a sliding
// window. (Examples need a running limitkv, so they are compiled but not
// run by go test.)
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	rl := client.New(rdb)

	d, err := rl.Slide(context.Background(), "sms:+15550100",
		[]client.Rule{client.PerHour(3), client.PerDay(10)})
	if err != nil {
		log.Fatal(err)
	}
	if !d.Allowed {
		fmt.Printf("refused: %d per window, retry in %v\n", d.Limit, d.RetryAfter)
		return
	}
	fmt.Printf("sent; %d left\n", d.Remaining)
}

// A daily quota that resets at midnight in Shanghai, whatever the time
// zone of the application's servers; a bulk request takes 50 units.
func ExampleClient_Fixed() {
	rl := client.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	d, err := rl.Fixed(context.Background(), "quota:acme",
		[]client.Rule{client.PerDay(10000)}, client.TZ("Asia/Shanghai"), client.Cost(50))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Allowed, d.Remaining, d.ResetAfter)
}

// Five successful logins per hour per user, recorded in a list that
// LRANGE shows.
func ExampleClient_Login() {
	rl := client.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	d, err := rl.Login(context.Background(), "login:42", client.Rule{Limit: 5, Window: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Allowed)
}

// redis-cell's call, typed: bursts of 16, 30 per minute.
func ExampleClient_Throttle() {
	rl := client.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	t, err := rl.Throttle(context.Background(), "user123", 15, 30, time.Minute, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Allowed, t.Remaining, t.RetryAfter)
}

// 100 requests per minute per client address on /api/, answered 429 with
// Retry-After and the RateLimit headers beyond that. Sentinel works the
// same way: pass redis.NewFailoverClient's client.
func ExampleNewLimiter() {
	rdb := redis.NewClient(&redis.Options{
		Addr: "localhost:6379",
		// Short timeouts: a limiter that is down should cost little.
		DialTimeout: 100 * time.Millisecond,
		ReadTimeout: 50 * time.Millisecond,
	})
	lim, err := client.NewLimiter(client.New(rdb), client.LimiterConfig{
		Name:  "api",
		Rules: []client.Rule{client.PerMinute(100)},
		OnError: func(r *http.Request, err error) {
			log.Printf("rate limiter: %v (request let through)", err)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	http.Handle("/api/", lim.Handler(api))
	log.Fatal(http.ListenAndServe(":8080", nil))
}

// Behind a load balancer at 10.0.0.0/8, the client is the address the
// balancer recorded in X-Forwarded-For; a header sent by anyone else is
// ignored.
func ExampleForwardedFor() {
	rl := client.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	lim, err := client.NewLimiter(rl, client.LimiterConfig{
		Rules: []client.Rule{client.PerSecond(20)},
		Key:   client.ForwardedFor(netip.MustParsePrefix("10.0.0.0/8")),
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = lim
}

// The limit lives on the server: defined once (or in --rl-policies), used
// by every application, changed without a deploy.
func ExampleClient_Check() {
	rl := client.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	ctx := context.Background()
	err := rl.SetPolicy(ctx, "api", client.SlidePolicy(
		[]client.Rule{client.PerMinute(100)}, client.Ban(10*time.Minute)))
	if err != nil {
		log.Fatal(err)
	}
	d, err := rl.Check(ctx, "api", "user:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Allowed)
}

// At most 4 exports in flight per customer; a crashed worker's slot frees
// itself after 5 minutes.
func ExampleClient_Acquire() {
	rl := client.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	ctx := context.Background()
	d, err := rl.Acquire(ctx, "exports:acme", 4, 5*time.Minute, "job-7f3a")
	if err != nil {
		log.Fatal(err)
	}
	if !d.Allowed {
		fmt.Println("busy, a slot frees within", d.RetryAfter)
		return
	}
	defer rl.Release(ctx, "exports:acme", "job-7f3a")
	// ... the export ...
}

// Middleware on a named policy, and a concurrency limit for a slow
// endpoint: requests hold a slot while they run, renewed past the lease.
func ExampleLimiterConfig() {
	rl := client.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	api, err := client.NewLimiter(rl, client.LimiterConfig{Policy: "api"})
	if err != nil {
		log.Fatal(err)
	}
	reports, err := client.NewLimiter(rl, client.LimiterConfig{
		Name: "reports", Concurrency: 2, Lease: time.Minute, FailClosed: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	var apiHandler, reportHandler http.Handler // the application's
	http.Handle("/api/", api.Handler(apiHandler))
	http.Handle("/reports/", reports.Handler(reportHandler))
}

// The keys denied most often in the last minute or two.
func ExampleClient_Top() {
	rl := client.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	top, err := rl.Top(context.Background(), 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range top {
		fmt.Println(d.Key, d.Denials)
	}
}
