package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"
)

// debugAddress checks --debug-listen and returns the address to listen
// on: a port alone (":6060" or "6060") listens on loopback only, since
// the profiles answer anyone who reaches them; another host must be
// named.
func debugAddress(flag string) (string, error) {
	if flag == "" {
		return "", nil
	}
	if !strings.Contains(flag, ":") {
		flag = ":" + flag
	}
	host, port, err := net.SplitHostPort(flag)
	if err != nil || port == "" {
		return "", usagef("--debug-listen %q is not an address: give a port (6060, listened on loopback only) or host:port", flag)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// serveDebug serves Go's profiles (net/http/pprof) on ln, a listener of
// their own, apart from the API: an operator can see where a replica's
// CPU, memory and goroutines go without rebuilding it, and the API's
// authentication, limits and timeouts stay as they are. It returns the
// function that stops it.
func serveDebug(ln net.Listener, log *slog.Logger) (stop func()) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// A CPU profile or a trace takes as long as it is asked to (seconds=).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("the profiles' listener stopped", "err", err)
		}
	}()
	// Not "url": that key names the API's address, which tools read from
	// the log.
	at := "http://" + ln.Addr().String() + "/debug/pprof/"
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		log.Warn("profiles listening beyond loopback: anyone who reaches this address can read them", "profiles", at)
	} else {
		log.Info("profiles listening", "profiles", at,
			"try", fmt.Sprintf("go tool pprof http://%s/debug/pprof/profile?seconds=30", ln.Addr()))
	}
	return func() {
		_ = srv.Close()
		<-done
	}
}
