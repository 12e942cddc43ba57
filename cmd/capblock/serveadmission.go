package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"capblock/internal/admission"
	"capblock/internal/service"
)

// admissionFlags are serve's flags of the admission webhooks, which keep
// the Kubernetes backend's sold nodes to the pods of the teams holding
// their blocks (docs/kubernetes.md, "Admission").
type admissionFlags struct {
	listen  string
	tlsCert string
	tlsKey  string
	exempt  []string
}

// addAdmissionFlags defines the flags of the admission webhooks.
func addAdmissionFlags(fl *pflag.FlagSet, f *admissionFlags) {
	fl.StringVar(&f.listen, "admission-listen", "", "serve the admission webhooks of --backend kubernetes over TLS on this address, such as 0.0.0.0:8443 (default: none)")
	fl.StringVar(&f.tlsCert, "admission-tls-cert", "", "certificate (PEM) of --admission-listen, the one the webhook configurations' caBundle trusts; read again when it changes")
	fl.StringVar(&f.tlsKey, "admission-tls-key", "", "private key (PEM) of --admission-tls-cert")
	fl.StringSliceVar(&f.exempt, "admission-exempt-namespaces", admission.DefaultExempt, "namespaces whose pods admission does not check (comma-separated or repeated; keep the webhooks' namespaceSelector the same)")
}

// checkAdmission refuses, before anything is opened, admission flags
// that cannot work.
func checkAdmission(f serveFlags) error {
	a := f.admission
	given := a.listen != "" || a.tlsCert != "" || a.tlsKey != "" || !slices.Equal(a.exempt, admission.DefaultExempt)
	switch {
	case !given:
		return nil
	case f.backend != "kubernetes":
		return usagef("--admission-listen and the other --admission flags need --backend kubernetes")
	case a.listen == "":
		return usagef("--admission-tls-cert, --admission-tls-key and --admission-exempt-namespaces need --admission-listen")
	case a.tlsCert == "" || a.tlsKey == "":
		return usagef("--admission-listen needs --admission-tls-cert and --admission-tls-key: the API server calls webhooks over TLS only")
	}
	for _, ns := range a.exempt {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return usagef("--admission-exempt-namespaces: %q is not a namespace's name: %s", ns, strings.Join(errs, "; "))
		}
	}
	return nil
}

// serveAdmission serves the admission webhooks on --admission-listen, if
// given, until stop: the team of a pod's namespace from an informer on
// the cluster's namespaces, the blocks from svc.
func serveAdmission(ctx context.Context, f serveFlags, svc *service.Service, log *slog.Logger) (stop func(), err error) {
	a := f.admission
	if a.listen == "" {
		return func() {}, nil
	}
	// 1. The cluster's namespaces, as the backend reaches the cluster.
	rc, err := kubeREST(f.kube)
	if err != nil {
		return nil, err
	}
	namespaces, err := admission.NewNamespaceCache(ctx, rc, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("starting admission: %w", err)
	}
	// 2. The handler and its TLS server.
	h, err := admission.New(admission.Config{Service: svc.Guarded(), Namespaces: namespaces, Exempt: a.exempt, Log: log})
	if err != nil {
		namespaces.Close()
		return nil, usageError(err)
	}
	srv, err := admission.NewServer(h, a.tlsCert, a.tlsKey)
	if err != nil {
		namespaces.Close()
		return nil, err
	}
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	ln, err := net.Listen("tcp", a.listen)
	if err != nil {
		namespaces.Close()
		return nil, fmt.Errorf("listening on %s: %w (choose another address with --admission-listen)", a.listen, err)
	}
	// 3. Serve. A server that stops serving leaves the webhooks failing
	// closed: pods that ask for capblock's nodes are refused, no other.
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
			log.Error("admission webhooks stopped serving; pods that ask for capblock's nodes are refused until a restart", "err", err)
		}
	}()
	log.Info("admission webhooks listening", "url", "https://"+ln.Addr().String(), "paths", admission.MutatePath+" "+admission.ValidatePath,
		"exempt", strings.Join(a.exempt, ","))
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
		namespaces.Close()
	}, nil
}

// kubeREST is the client configuration of the cluster that the flags of
// --backend kubernetes name: the kubeconfig, else the pod's own.
func kubeREST(f kubeFlags) (*rest.Config, error) {
	cfg, err := kubeConfig(f)
	if err != nil {
		return nil, err
	}
	if cfg.Kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("reading the in-cluster configuration (outside a pod, give a kubeconfig): %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	return rc, nil
}
