package kube

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"capblock/internal/admission"
	"capblock/internal/kubetest"
)

// deployDir is deploy/kubernetes, from this package's directory.
const deployDir = "../../../deploy/kubernetes"

// cluster is a control plane for capblock, its admin's client, and the
// objects of deploy/kubernetes.
type cluster struct {
	*kubetest.Cluster
	admin    clientset.Interface
	deployed deployObjects
}

// deployObjects are the objects of deploy/kubernetes that the test
// applies, as the files have them.
type deployObjects struct {
	namespace  *corev1.Namespace
	account    *corev1.ServiceAccount
	role       *rbacv1.ClusterRole
	binding    *rbacv1.ClusterRoleBinding
	mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	validating *admissionregistrationv1.ValidatingWebhookConfiguration
}

// loadDeploy decodes deploy/kubernetes's files strictly and keeps the
// objects that give capblock its rights and register its webhooks.
func loadDeploy(t *testing.T) deployObjects {
	t.Helper()
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var d deployObjects
	for _, name := range []string{"namespace.yaml", "serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml", "webhook.yaml"} {
		data, err := os.ReadFile(filepath.Join(deployDir, name))
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			obj, _, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			d.keep(obj)
		}
	}
	if d.namespace == nil || d.account == nil || d.role == nil || d.binding == nil || d.mutating == nil || d.validating == nil {
		t.Fatalf("deploy/kubernetes lacks an object the test applies: %+v", d)
	}
	return d
}

func (d *deployObjects) keep(obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Namespace:
		d.namespace = o
	case *corev1.ServiceAccount:
		d.account = o
	case *rbacv1.ClusterRole:
		d.role = o
	case *rbacv1.ClusterRoleBinding:
		d.binding = o
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		d.mutating = o
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		d.validating = o
	}
}

// startCluster starts a control plane whose pods run until the test ends
// them, with 8 nodes of 8 GPUs in each of zone-a and zone-b.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	d := loadDeploy(t)
	c := kubetest.Start(t, kubetest.Options{PodsRunUntilEnded: true})
	for _, zone := range []string{"zone-a", "zone-b"} {
		if _, err := c.AddGPUNodes(t.Context(), 8, 8, zone, nil); err != nil {
			t.Fatal(err)
		}
	}
	return &cluster{Cluster: c, admin: clientset.NewForConfigOrDie(c.AdminConfig()), deployed: d}
}

// applyRights applies deploy/kubernetes's namespace, ServiceAccount,
// ClusterRole and binding, and writes a kubeconfig that authenticates as
// the ServiceAccount, with a token from the TokenRequest API: capblock
// has those rights and nothing more. It returns the kubeconfig's path.
func (c *cluster) applyRights(t *testing.T, dir string) string {
	t.Helper()
	ctx := t.Context()
	d := c.deployed
	must(t, kubetest.Create(ctx, c.admin.CoreV1().Namespaces(), d.namespace))
	must(t, kubetest.Create(ctx, c.admin.CoreV1().ServiceAccounts(d.account.Namespace), d.account))
	must(t, kubetest.Create(ctx, c.admin.RbacV1().ClusterRoles(), d.role))
	must(t, kubetest.Create(ctx, c.admin.RbacV1().ClusterRoleBindings(), d.binding))
	sa, err := c.ServiceAccountConfig(ctx, d.account.Namespace, d.account.Name)
	must(t, err)
	saClient := clientset.NewForConfigOrDie(sa)
	kubetest.Eventually(t, "the ServiceAccount's binding is in force", func() (bool, error) {
		_, err := saClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if _, err := saClient.CoreV1().Secrets(d.account.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount lists Secrets: %v; want Forbidden, it holds deploy/kubernetes's rights only", err)
	}
	return writeKubeconfig(t, filepath.Join(dir, "capblock.kubeconfig"), sa)
}

// applyTwin gives a second ServiceAccount, name, in capblock's namespace
// the same ClusterRole as capblock's (after applyRights), and writes a
// kubeconfig for it: a second replica that the API server tells apart
// from the first. It returns the kubeconfig's path.
func (c *cluster) applyTwin(t *testing.T, dir, name string) string {
	t.Helper()
	ctx := t.Context()
	d := c.deployed
	must(t, kubetest.Create(ctx, c.admin.CoreV1().ServiceAccounts(d.account.Namespace),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.account.Namespace}}))
	binding := d.binding.DeepCopy()
	binding.ObjectMeta = metav1.ObjectMeta{Name: name}
	binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: d.account.Namespace, Name: name}}
	must(t, kubetest.Create(ctx, c.admin.RbacV1().ClusterRoleBindings(), binding))
	sa, err := c.ServiceAccountConfig(ctx, d.account.Namespace, name)
	must(t, err)
	saClient := clientset.NewForConfigOrDie(sa)
	kubetest.Eventually(t, "the twin ServiceAccount's binding is in force", func() (bool, error) {
		_, err := saClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	return writeKubeconfig(t, filepath.Join(dir, name+".kubeconfig"), sa)
}

// accountUser is the API server's user name of capblock's ServiceAccount.
func (c *cluster) accountUser() string {
	return "system:serviceaccount:" + c.deployed.account.Namespace + ":" + c.deployed.account.Name
}

func writeKubeconfig(t *testing.T, path string, rc *rest.Config) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["capblock"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "capblock"}
	cfg.CurrentContext = "kubetest"
	must(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// registerWebhooks registers deploy/kubernetes's webhooks, pointed at
// capblock's admission address on loopback and trusting ca.
func (c *cluster) registerWebhooks(t *testing.T, addr string, ca []byte) {
	t.Helper()
	base := "https://" + addr
	mutating, validating := c.deployed.mutating.DeepCopy(), c.deployed.validating.DeepCopy()
	for i := range mutating.Webhooks {
		url := base + admission.MutatePath
		mutating.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}
	}
	for i := range validating.Webhooks {
		url := base + admission.ValidatePath
		validating.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}
	}
	must(t, kubetest.Create(t.Context(), c.admin.AdmissionregistrationV1().MutatingWebhookConfigurations(), mutating))
	must(t, kubetest.Create(t.Context(), c.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations(), validating))
}

// teamNamespace makes namespace name, labelled as team's, and a user
// who may manage pods there and nothing else; it returns the user's
// client.
func (c *cluster) teamNamespace(t *testing.T, name, team string) clientset.Interface {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{admission.TeamLabel: team}}}
	must(t, kubetest.Create(ctx, c.admin.CoreV1().Namespaces(), ns))
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "watch", "delete"}},
	}}
	must(t, kubetest.Create(ctx, c.admin.RbacV1().Roles(name), role))
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pods"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: name, Name: "user"}},
	}
	must(t, kubetest.Create(ctx, c.admin.RbacV1().RoleBindings(name), binding))
	cfg, err := c.ServiceAccountConfig(ctx, name, "user")
	must(t, err)
	user := clientset.NewForConfigOrDie(cfg)
	kubetest.Eventually(t, "the user of "+name+" may list its pods", func() (bool, error) {
		_, err := user.CoreV1().Pods(name).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	return user
}

// setNotReady takes node from KWOK, as a kubelet that stopped, and
// reports it NotReady.
func (c *cluster) setNotReady(t *testing.T, name string) {
	t.Helper()
	ctx := t.Context()
	patch := []byte(`{"metadata":{"annotations":{"kwok.x-k8s.io/node":null}}}`)
	_, err := c.admin.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	must(t, err)
	now := metav1.Now()
	kubetest.Eventually(t, "reporting "+name+" NotReady", func() (bool, error) {
		n, err := c.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
					Reason: "KubeletNotReady", Message: "container runtime is down", LastHeartbeatTime: now, LastTransitionTime: now}
			}
		}
		_, err = c.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err == nil, nil // a conflict with a heartbeat: again
	})
}

// testPKI is a CA made for the test and a serving certificate it signed
// for 127.0.0.1, as the API server must trust a webhook.
type testPKI struct {
	caPEM             []byte
	certFile, keyFile string
}

func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	now := time.Now()
	caKey, key := newKey(t), newKey(t)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capblock test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(t, err)
	ca, err := x509.ParseCertificate(caDER)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	p := testPKI{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	must(t, os.WriteFile(p.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(t, os.WriteFile(p.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	return k
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
