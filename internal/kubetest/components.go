package kubetest

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// fakeNodeAnnotation marks the nodes that KWOK plays the kubelet of; it
// leaves every other node alone.
const fakeNodeAnnotation = "kwok.x-k8s.io/node"

// serviceCIDR is the range of Service IPs; its first address is the
// "kubernetes" Service, which the serving certificate names.
const serviceCIDR = "10.96.0.0/24"

// etcdArgs runs a one-member etcd on loopback that never syncs to disk:
// its data dies with the test.
func etcdArgs(dir, clientURL string, peerPort int) []string {
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	return []string{
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
}

// apiServerArgs serves TLS on loopback; it authenticates the token file's
// admin and ServiceAccount tokens it signed itself, and authorizes with
// RBAC as a real cluster does.
func apiServerArgs(dir string, pki pkiFiles, etcdURL string, port int, tokens string) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "apiserver"),
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servingKey,
		"--client-ca-file=" + pki.caCert,
		"--token-auth-file=" + tokens,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.serviceAccountPublic,
		"--service-account-signing-key-file=" + pki.serviceAccountKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--profiling=false",
	}
}

// controllerManagerArgs runs the controllers that a test cluster needs:
// ServiceAccounts, Jobs and node lifecycle (which lifts the not-ready taint
// once KWOK reports a node Ready).
func controllerManagerArgs(dir string, pki pkiFiles, kubeconfig string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "controller-manager"),
		"--service-account-private-key-file=" + pki.serviceAccountKey,
		"--root-ca-file=" + pki.caCert,
		"--profiling=false",
	}
}

func schedulerArgs(dir, kubeconfig string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "scheduler"),
		"--profiling=false",
	}
}

// kwokArgs manages only the nodes annotated as fake, with the stages that
// make them Ready and run their pods.
func kwokArgs(kubeconfig string, stages []string) []string {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + fakeNodeAnnotation + "=fake",
	}
	for _, s := range stages {
		args = append(args, "--config="+s)
	}
	return args
}

// waitDefaultServiceAccount waits for the controller manager to create the
// default namespace's ServiceAccount: until then, pods there are refused.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return fmt.Errorf("making a client: %w", err)
	}
	return c.poll(ctx, "waiting for the default ServiceAccount", func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}
