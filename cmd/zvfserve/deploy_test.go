package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// deployedManifests is the operator's Kubernetes manifests.
const deployedManifests = "../../docs/deploy/kubernetes.yaml"

// manifests is what kubernetes.yaml holds, decoded into the upstream types.
type manifests struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	ingress    *networkingv1.Ingress
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	pdb        *policyv1.PodDisruptionBudget
}

// fresh points *p at a new zero T and returns it, for decoding into.
func fresh[T any](p **T) any {
	*p = new(T)
	return *p
}

// decodeManifests decodes each document strictly (an unknown or misspelt
// field is an error, as kubectl apply --validate=strict makes it) into the
// type its apiVersion and kind name.
func decodeManifests(b []byte) (manifests, error) {
	var m manifests
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return m, fmt.Errorf("document %d: %w", i, err)
		}
		var into any
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			into = fresh(&m.deployment)
		case "v1 Service":
			into = fresh(&m.service)
		case "networking.k8s.io/v1 Ingress":
			into = fresh(&m.ingress)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			into = fresh(&m.hpa)
		case "policy/v1 PodDisruptionBudget":
			into = fresh(&m.pdb)
		default:
			return m, fmt.Errorf("document %d: unexpected %s %s", i, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			return m, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
	}
	if m.deployment == nil || m.service == nil || m.ingress == nil || m.hpa == nil || m.pdb == nil {
		return m, fmt.Errorf("want a Deployment, Service, Ingress, HorizontalPodAutoscaler and PodDisruptionBudget, got %+v", m)
	}
	return m, nil
}

// TestKubernetesManifests: docs/deploy/kubernetes.yaml decodes strictly
// with the upstream API types, its args are serve's flags, and its parts
// agree: probes on /readyz and /healthz of the admin port, readiness
// noticed within --shutdown-delay, SIGKILL only after --shutdown-delay +
// --shutdown-grace, memory for the cache plus serve's headroom, Service,
// Ingress and autoscaler aimed at the Deployment, and the Ingress
// balancing like docs/deploy/nginx.conf.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(deployedManifests)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifests(b)
	if err != nil {
		t.Fatal(err)
	}
	// The decoding is strict: a misspelt field fails.
	if _, err := decodeManifests(bytes.Replace(b, []byte("terminationGracePeriodSeconds:"), []byte("terminationGracePeriod:"), 1)); err == nil {
		t.Error("a misspelt field decoded without error: the check is not strict")
	}

	pod := m.deployment.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	ctr := pod.Spec.Containers[0]
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var c serveConfig
	serveFlags(fs, &c)
	if err := fs.Parse(ctr.Args); err != nil {
		t.Fatalf("the container's args are not serve's flags: %v", err)
	}
	if len(fs.Args()) == 0 {
		t.Error("the container's args name no store")
	}
	for _, s := range fs.Args() {
		if name, u, ok := strings.Cut(s, "="); !ok || name == "" || !strings.Contains(u, "://") {
			t.Errorf("store argument %q is not name=URL", s)
		}
	}
	port := func(name string) int32 {
		for _, p := range ctr.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		t.Errorf("the container has no port named %q", name)
		return 0
	}
	if _, p, _ := strings.Cut(c.addr, ":"); p != strconv.Itoa(int(port("http"))) {
		t.Errorf("--addr %s, but the http port is %d", c.addr, port("http"))
	}
	if _, p, _ := strings.Cut(c.adminAddr, ":"); p != strconv.Itoa(int(port("admin"))) {
		t.Errorf("--admin-addr %q, but the admin port is %d", c.adminAddr, port("admin"))
	}
	probes := []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"readiness", ctr.ReadinessProbe, "/readyz"},
		{"liveness", ctr.LivenessProbe, "/healthz"},
	}
	for _, p := range probes {
		// On the admin port: at --max-connections the API's port refuses
		// new connections when none is idle, probes' too; the admin
		// listener has its own (docs/deploy.md).
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "admin" {
			t.Errorf("the %s probe is %+v, want GET %s on port admin", p.name, p.probe, p.path)
		}
	}
	if r := ctr.ReadinessProbe; r != nil {
		if noticed := time.Duration(r.PeriodSeconds*r.FailureThreshold) * time.Second; noticed >= c.shutdownDelay {
			t.Errorf("readiness is noticed within %v of SIGTERM, not within --shutdown-delay %v: the listener closes while the endpoint still gets traffic", noticed, c.shutdownDelay)
		}
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= c.shutdownDelay+c.shutdownGrace {
		t.Errorf("terminationGracePeriodSeconds %v is not longer than --shutdown-delay %v + --shutdown-grace %v: SIGKILL would cut the drain", g, c.shutdownDelay, c.shutdownGrace)
	}
	soft := resource.NewQuantity(c.cacheBytes+memoryHeadroom, resource.BinarySI)
	req, lim := ctr.Resources.Requests[corev1.ResourceMemory], ctr.Resources.Limits[corev1.ResourceMemory]
	if req.Cmp(*soft) < 0 || lim.Cmp(req) < 0 {
		t.Errorf("memory request %s, limit %s: want request ≥ the soft limit serve sets (--cache-bytes + headroom = %s) and limit ≥ request", req.String(), lim.String(), soft.String())
	}
	if _, ok := ctr.Resources.Requests[corev1.ResourceCPU]; !ok {
		t.Error("no CPU request: the autoscaler's utilization target needs one")
	}

	labels := pod.Labels
	matches := func(sel map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !matches(m.deployment.Spec.Selector.MatchLabels) {
		t.Errorf("the Deployment's selector %v does not match its pods' labels %v", m.deployment.Spec.Selector.MatchLabels, labels)
	}
	if !matches(m.service.Spec.Selector) {
		t.Errorf("the Service's selector %v does not match the pods' labels %v", m.service.Spec.Selector, labels)
	}
	for _, p := range m.service.Spec.Ports {
		if p.TargetPort.String() != "http" {
			t.Errorf("the Service sends port %d to %s, want the container's http port", p.Port, p.TargetPort.String())
		}
	}
	if m.pdb.Spec.Selector == nil || !matches(m.pdb.Spec.Selector.MatchLabels) {
		t.Error("the PodDisruptionBudget does not select the pods")
	}

	ing := m.ingress
	if len(ing.Spec.Rules) == 0 || ing.Spec.Rules[0].HTTP == nil || len(ing.Spec.Rules[0].HTTP.Paths) == 0 {
		t.Fatal("the Ingress has no path")
	}
	if be := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service; be == nil || be.Name != m.service.Name || be.Port.Name != "http" {
		t.Errorf("the Ingress's backend %+v is not the Service %s's http port", be, m.service.Name)
	}
	nginx, err := os.ReadFile(deployedNginxConf)
	if err != nil {
		t.Fatal(err)
	}
	retry := regexp.MustCompile(`(?m)^\s*proxy_next_upstream\s+([^;]+);`).FindSubmatch(nginx)
	annotations := []struct{ key, want string }{
		{"nginx.ingress.kubernetes.io/upstream-hash-by", "$request_uri"},
		{"nginx.ingress.kubernetes.io/proxy-next-upstream", string(retry[1])},
	}
	for _, a := range annotations {
		if got := ing.Annotations[a.key]; got != a.want {
			t.Errorf("Ingress annotation %s = %q, want %q (as docs/deploy/nginx.conf)", a.key, got, a.want)
		}
	}

	hpa := m.hpa.Spec
	if hpa.ScaleTargetRef.Kind != "Deployment" || hpa.ScaleTargetRef.Name != m.deployment.Name {
		t.Errorf("the autoscaler scales %s %s, not the Deployment %s", hpa.ScaleTargetRef.Kind, hpa.ScaleTargetRef.Name, m.deployment.Name)
	}
	if hpa.MinReplicas == nil || *hpa.MinReplicas < 3 || hpa.MaxReplicas < *hpa.MinReplicas {
		t.Errorf("autoscaler replicas %v..%d: want at least three, so that one can drain while two serve", hpa.MinReplicas, hpa.MaxReplicas)
	}
	if min := m.pdb.Spec.MinAvailable; min == nil || hpa.MinReplicas == nil || min.IntValue() >= int(*hpa.MinReplicas) {
		t.Errorf("the PodDisruptionBudget's minAvailable %v leaves no replica to drain of %v", min, hpa.MinReplicas)
	}
}
