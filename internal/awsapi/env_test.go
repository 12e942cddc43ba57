package awsapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"capblock/internal/awsapi"
	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/service"
	"capblock/internal/store/sqlite"
)

// t0 is the simulated time the service starts at; the SDK signs with
// the wall clock, which the endpoint checks signatures against.
var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// keyTable stands for the service's access keys (which the service
// implements): a table of key ids, their secrets and principals, from
// which a revoked key is deleted.
type keyTable struct {
	mu   sync.Mutex
	keys map[string]accessKey
}

type accessKey struct {
	secret string
	p      core.Principal
	// disabled says why the key's user or team is disabled, when it is.
	disabled string
}

func (k *keyTable) AuthenticateAccessKey(_ context.Context, id string) (string, core.Principal, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.keys[id]
	if !ok {
		return "", core.Principal{}, fmt.Errorf("access key %s: %w", id, core.ErrUnauthenticated)
	}
	if key.disabled != "" {
		// As the service answers: refused, with the secret.
		return key.secret, key.p, fmt.Errorf("%w: %s", core.ErrUnauthenticated, key.disabled)
	}
	return key.secret, key.p, nil
}

// disable refuses the key as the service refuses a disabled user's or
// team's, saying why; disable(id, "") enables it again.
func (k *keyTable) disable(id, why string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := k.keys[id]
	key.disabled = why
	k.keys[id] = key
}

func (k *keyTable) revoke(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.keys, id)
}

// env is a real service on SQLite with the demo fleet and a simulated
// clock, behind the AWS endpoint mounted at /aws, and an access key for
// each of: a member of team alpha, a viewer of alpha, a member of team
// beta, an admin.
type env struct {
	t     *testing.T
	svc   *service.Service
	sim   *clock.Sim
	keys  *keyTable
	url   string // the server's, without /aws
	paths chan string
	alpha core.Team
	beta  core.Team
}

const (
	memberKey = "AKIAALPHAMEMBER00001"
	viewerKey = "AKIAALPHAVIEWER00001"
	betaKey   = "AKIABETAMEMBER000001"
	adminKey  = "AKIAADMIN00000000001"
)

func secretOf(id string) string { return "secret-of-" + id }

func newEnv(t *testing.T, opts awsapi.Options) *env {
	t.Helper()
	return newEnvWith(t, opts, nil)
}

// newEnvWith is newEnv whose SageMaker calls, when sageMaker is not nil,
// are answered by the front end it makes over the env's service.
func newEnvWith(t *testing.T, opts awsapi.Options, sageMaker func(*service.Service) awsapi.JSONService) *env {
	t.Helper()
	ctx := context.Background()
	f := fleet.Demo()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sim := clock.NewSim(t0)
	svc, err := service.New(ctx, service.Config{Fleet: f, Store: st, Backend: local.NewSim(discard(), f.Nodes), Clock: sim,
		JobsDir: t.TempDir(), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, svc: svc, sim: sim, keys: &keyTable{keys: map[string]accessKey{}}, paths: make(chan string, 1000)}
	if e.alpha, err = svc.CreateTeam(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if e.beta, err = svc.CreateTeam(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		key, name, team string
		role            core.Role
	}{
		{memberKey, "ann", e.alpha.ID, core.RoleMember},
		{viewerKey, "vic", e.alpha.ID, core.RoleViewer},
		{betaKey, "bob", e.beta.ID, core.RoleMember},
		{adminKey, "ops", e.alpha.ID, core.RoleAdmin},
	} {
		user, err := svc.CreateUser(ctx, u.name, u.team, u.role)
		if err != nil {
			t.Fatal(err)
		}
		e.keys.keys[u.key] = accessKey{secret: secretOf(u.key), p: core.Principal{User: user, TokenID: u.key}}
	}
	opts.Logger = discard()
	if sageMaker != nil {
		opts.SageMaker = sageMaker(svc)
	}
	h := awsapi.New(svc.Guarded(), e.keys, opts)
	mux := http.NewServeMux()
	mux.Handle("/aws", h)
	mux.Handle("/aws/", h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case e.paths <- r.URL.Path:
		default:
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// ec2 is an EC2 client of the real SDK signing with the access key id,
// whose secret is secretOf(id) unless secret says otherwise.
func (e *env) ec2(id string, secret ...string) *ec2.Client {
	s := secretOf(id)
	if len(secret) > 0 {
		s = secret[0]
	}
	return ec2.New(ec2.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(e.url + "/aws"),
		Credentials:  credentials.NewStaticCredentialsProvider(id, s, ""),
	})
}

// principal is who an access key acts as.
func (e *env) principal(key string) core.Principal {
	e.keys.mu.Lock()
	defer e.keys.mu.Unlock()
	return e.keys.keys[key].p
}
