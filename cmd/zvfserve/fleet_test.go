package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/cloud"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// Fleet settings: short checks so that the test sees a replacement through
// within seconds; docs/deploy.md states the bound they give.
const (
	fleetRevalidate = time.Second
	fleetSettle     = time.Second
	fleetDelay      = time.Second // --shutdown-delay
	fleetGrace      = 5 * time.Second
	// fleetBound is how long after the last write of a replacement a
	// replica may still serve the old version (docs/deploy.md): the next
	// check sees the final listing (--revalidate), which must stay the same
	// for --settle, seen by the check after (--revalidate again), a
	// second for a listing of the store and object stores' whole-second
	// timestamps, and a second for opening the new version (the old one
	// answers until it has opened: on CI's two busy cores an answer
	// started 4.03-4.2 s after the last write still got the old version).
	fleetBound = 2*fleetRevalidate + fleetSettle + 2*time.Second
	// localityCache is each replica's cache in the locality runs: small,
	// as a replica's share of a large dataset would be.
	localityCache = 16 << 20
)

// TestFleet runs zvfserve as a fleet with real parts on loopback: MinIO
// holding the stores, three zvfserve replicas (processes), nginx in front
// with the configuration of docs/deploy/nginx.conf. A bounded mixed load
// runs while one replica is killed and restarted, another is stopped with
// SIGTERM and restarted, and a store is replaced in the bucket object by
// object. Every answer is compared with what one zvfserve alone answers
// at the store's old and new version. Then the cache locality of
// consistent hashing and round-robin is measured on a viewer-like load.
func TestFleet(t *testing.T) {
	if raceBuild {
		t.Skip("the fleet test runs real processes under load; it runs without -race")
	}
	if testing.Short() {
		t.Skip("the fleet test takes about a minute; not with -short")
	}
	env := needFleet(t)
	ctx := context.Background()
	began := time.Now()

	// Two versions of the scene: cells is replaced by v2 during the load,
	// axons stays. v2 has fewer objects, so some keys are deleted and some
	// objects exist in v1 only.
	v1 := demoObjects(t, demo.Options{Seed: 1, Scale: 1.5}, "cells", "axons")
	v2 := demoObjects(t, demo.Options{Seed: 2, Scale: 1}, "cells")
	const bucket = "zvf-fleet"
	prefix := fmt.Sprintf("run-%d", time.Now().UnixNano())
	makeBucket(t, env, bucket)
	stores := map[string]string{}
	for _, name := range []string{"cells", "axons"} {
		u := "s3://" + bucket + "/" + prefix + "/" + name + env.s3Query()
		w := zvftest.StoreWith(t, u, cloud.Drivers())
		if err := upload(ctx, w, v1[name], nil, 16); err != nil {
			t.Fatal(err)
		}
		stores[name] = u
	}
	cellsW := zvftest.StoreWith(t, stores["cells"], cloud.Drivers())
	// S3 stamps whole seconds: a replica that opened a store in the second
	// of its last write cannot tell that write from a later one, refuses
	// it and reopens, naming the version by its listing instead of its
	// metadata (docs/operations.md). The stores start quiet.
	for mark := cellsW.Now(); !cellsW.Now().After(mark); {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("setup: built and uploaded %d + %d objects in %v", len(v1["cells"]), len(v1["axons"]), time.Since(began).Round(time.Millisecond))

	logDir := t.TempDir()
	newReplica := func(name string, cacheBytes int64) *replica {
		r := &replica{name: name, port: freePort(t), admin: freePort(t), logDir: logDir, bin: env.bin,
			args: []string{"--revalidate", fleetRevalidate.String(), "--settle", fleetSettle.String(),
				"--shutdown-delay", fleetDelay.String(), "--shutdown-grace", fleetGrace.String(),
				"--cache-bytes", fmt.Sprint(cacheBytes), "--log-format", "json",
				"cells=" + stores["cells"], "axons=" + stores["axons"]}}
		t.Cleanup(r.stop)
		return r
	}

	// What one zvfserve alone answers at v1.
	plain, chains := fleetURLs()
	big := reqKey{http.MethodGet, "/api/v1/stores/axons/bbox?min=0,0,0&max=1000,1000,600&level=0&attributes=*&f=json", ""}
	keys := append(append(slices.Clone(plain), chains...), big)
	single := newReplica("single", 256<<20)
	single.start(t)
	refs1, err := collectRefs(ctx, single.url(), keys)
	if err != nil {
		t.Fatal(err)
	}
	single.stop()
	if a := refs1[big]; a.status != http.StatusOK || a.size < 2<<20 {
		t.Fatalf("the big answer is %d, %d bytes: too small to be in flight when its replica goes", a.status, a.size)
	}

	reps := []*replica{newReplica("r0", 256<<20), newReplica("r1", 256<<20), newReplica("r2", 256<<20)}
	var addrs []string
	for _, r := range reps {
		r.start(t)
		addrs = append(addrs, r.addr())
	}
	lb := startNginx(t, env.nginx, addrs, false)

	st := &fleetState{up: map[string]bool{"r0": true, "r1": true, "r2": true}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var workers sync.WaitGroup
	loadStart := time.Now()
	for i := range 4 {
		workers.Go(func() { st.worker(loadCtx, uint64(i+1), lb, reps, plain, chains, 5000) })
	}
	byName := map[string]*replica{}
	for _, r := range reps {
		byName[r.name] = r
	}
	var ev fleetEvents

	// 1. Kill the replica that serves the big answer while it streams it,
	// to a client through nginx and to one straight to it.
	waitUntilLoad(loadStart, 2*time.Second)
	viaLB, err := openSlow(ctx, lb.url(), "nginx", big)
	if err != nil {
		t.Fatal(err)
	}
	victim := replicaAt(reps, viaLB.rec.upstream)
	if victim == nil {
		t.Fatalf("nginx answered from %q, no replica's address", viaLB.rec.upstream)
	}
	direct, err := openSlow(ctx, victim.url(), victim.name, big)
	if err != nil {
		t.Fatal(err)
	}
	st.setUp(victim.name, false)
	ev.killed, ev.killAt = victim, time.Now()
	if err := victim.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	victim.wait(10 * time.Second)
	ev.cutViaLB, ev.cutDirect = viaLB.finish(), direct.finish()
	st.add(ev.cutViaLB)
	st.add(ev.cutDirect)
	waitUntilLoad(loadStart, 4*time.Second)
	victim.start(t)
	ev.restartedAt = time.Now()
	st.setUp(victim.name, true)

	// 2. Replace cells in the bucket, object by object, in place, four
	// puts at a time (several seconds); meanwhile stop another replica
	// with SIGTERM.
	replaced := make(chan error, 1)
	ev.replaceStart = time.Now()
	go func() { replaced <- upload(ctx, cellsW, v2["cells"], v1["cells"], 4) }()
	waitUntilLoad(loadStart, 6*time.Second)
	ev.drained = reps[(slices.Index(reps, victim)+1)%len(reps)]
	ev.drain = drainReplica(t, ctx, st, ev.drained, big)
	if err := <-replaced; err != nil {
		t.Fatal(err)
	}
	ev.replaceEnd = time.Now()
	t.Logf("replacement: %d puts and %d deletes in %v", len(v2["cells"]), deleted(v2["cells"], v1["cells"]), ev.replaceEnd.Sub(ev.replaceStart).Round(time.Millisecond))
	ev.drained.start(t)
	st.setUp(ev.drained.name, true)

	// 3. Load on past the bound, then stop.
	time.Sleep(time.Until(ev.replaceEnd.Add(fleetBound + 3*time.Second)))
	stopLoad()
	workers.Wait()
	loadTook := time.Since(loadStart)

	// What one zvfserve alone answers at v2, for every request the load
	// sent (cursors of v2 pages included).
	single.start(t)
	refs2, err := collectRefs(ctx, single.url(), keys)
	if err != nil {
		t.Fatal(err)
	}
	single.stop()
	for k, a := range refs1 {
		if strings.Contains(k.path, "/axons") && !a.same(refs2[k]) {
			t.Errorf("axons was not replaced, yet its single-node answer changed: %s", k)
		}
	}

	// Every replica serves v2 now, under the single node's ETag.
	for _, r := range reps {
		k := reqKey{http.MethodGet, "/api/v1/stores/cells", ""}
		got := do(ctx, fleetClient(false), r.url(), r.name, k, "")
		if got.err != nil || !got.ans.same(refs2[k]) {
			t.Errorf("%s after the replacement: %d %s, want the single node's %d %s (err %v)", r.name, got.ans.status, got.ans.etag,
				refs2[k].status, refs2[k].etag, got.err)
		}
	}

	rep := judge(st.records, refs1, refs2, &ev)
	for _, f := range rep.failures {
		t.Error(f)
	}
	t.Logf("fleet load: %d requests in %v (%d through nginx, %d straight to a replica), %d failed, %d cut in flight on the killed replica; "+
		"answers: %d of v1, %d of v2, %d 304, %d 503 store-changing, %d 409 stale-cursor; the last v1 answer %v after the upload began, the first v2 %v after",
		len(st.records), loadTook.Round(time.Millisecond), rep.viaLB, len(st.records)-rep.viaLB, len(rep.failures), rep.cut,
		rep.v1, rep.v2, rep.notModified, rep.changing, rep.stale, rep.lastV1.Round(time.Millisecond), rep.firstV2.Round(time.Millisecond))
	t.Logf("kill: %s killed %v into the load; the stream through nginx ended with %v after %d bytes, the direct one with %v after %d bytes",
		ev.killed.name, ev.killAt.Sub(loadStart).Round(time.Millisecond), ev.cutViaLB.err, ev.cutViaLB.ans.size, ev.cutDirect.err, ev.cutDirect.ans.size)
	t.Logf("drain: %s", ev.drain)
	for _, r := range reps {
		t.Logf("%s: peak RSS %.1f MiB", r.name, float64(r.rssPeak())/(1<<20))
	}

	for _, r := range reps {
		r.stop()
	}
	measureLocality(t, env, newReplica, localityCache)
	t.Logf("fleet test took %v", time.Since(began).Round(time.Second))
}

// deleted counts the keys of old that new lacks.
func deleted(new, old storeObjects) int {
	n := 0
	for k := range old {
		if _, ok := new[k]; !ok {
			n++
		}
	}
	return n
}

// waitUntilLoad waits until d into the load: the script's steps are set
// in time, as an operator's would be, while the load runs on.
func waitUntilLoad(start time.Time, d time.Duration) {
	time.Sleep(time.Until(start.Add(d)))
}

// replicaAt is the replica whose address ends nginx's upstream list.
func replicaAt(reps []*replica, upstream string) *replica {
	parts := strings.Split(upstream, ", ")
	last := strings.TrimSpace(parts[len(parts)-1])
	for _, r := range reps {
		if r.addr() == last {
			return r
		}
	}
	return nil
}

// fleetEvents is when the script did what.
type fleetEvents struct {
	killed                   *replica
	killAt, restartedAt      time.Time
	cutViaLB, cutDirect      record
	drained                  *replica
	drain                    string
	replaceStart, replaceEnd time.Time
}

// drainReplica stops r with SIGTERM while it streams the big answer to a
// slow client: /readyz must turn 503 while /healthz stays 200 and the
// replica still answers, the stream must end whole, and the process must
// exit 0 within --shutdown-delay + --shutdown-grace.
func drainReplica(t *testing.T, ctx context.Context, st *fleetState, r *replica, big reqKey) string {
	t.Helper()
	s, err := openSlow(ctx, r.url(), r.name, big)
	if err != nil {
		t.Fatal(err)
	}
	st.setUp(r.name, false)
	sent := time.Now()
	if err := r.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c := fleetClient(false)
	notReady := time.Duration(-1)
	for time.Since(sent) < fleetDelay {
		k := reqKey{http.MethodGet, "/readyz", ""}
		ready := do(ctx, c, r.url(), r.name, k, "")
		health := do(ctx, c, r.url(), r.name, reqKey{http.MethodGet, "/healthz", ""}, "")
		if ready.err == nil && ready.ans.status == http.StatusServiceUnavailable {
			if health.err != nil || health.ans.status != http.StatusOK {
				t.Errorf("%s draining: /healthz %d %v, want 200 (liveness must not fail a draining replica)", r.name, health.ans.status, health.err)
			}
			notReady = time.Since(sent)
			break
		}
	}
	if notReady < 0 {
		t.Errorf("%s: /readyz never answered 503 during the %v shutdown delay", r.name, fleetDelay)
	}
	rec := s.finish()
	st.add(rec)
	if rec.err != nil || rec.ans.status != http.StatusOK {
		t.Errorf("%s: the answer in flight at SIGTERM ended with %d, %v after %d bytes; want it whole", r.name, rec.ans.status, rec.err, rec.ans.size)
	}
	state, ok := r.wait(fleetDelay + fleetGrace + 5*time.Second)
	switch {
	case !ok:
		t.Fatalf("%s did not exit within %v of SIGTERM: %s", r.name, fleetDelay+fleetGrace+5*time.Second, r.logs())
	case state.ExitCode() != 0:
		t.Errorf("%s exited %d after SIGTERM, want 0: %s", r.name, state.ExitCode(), r.logs())
	}
	return fmt.Sprintf("%s: /readyz 503 %v after SIGTERM; the %d-byte answer in flight ended whole; exit %d %v after SIGTERM",
		r.name, notReady.Round(time.Millisecond), rec.ans.size, state.ExitCode(), time.Since(sent).Round(time.Millisecond))
}

// fleetReport is what judge found.
type fleetReport struct {
	failures                                  []string
	viaLB, cut, v1, v2, notModified, changing int
	stale                                     int
	lastV1, firstV2                           time.Duration // after the replacement began
}

// judge checks every record against the single node's answers.
func judge(records []record, refs1, refs2 refs, ev *fleetEvents) fleetReport {
	var rep fleetReport
	fail := func(r record, format string, a ...any) {
		if len(rep.failures) < 30 {
			rep.failures = append(rep.failures, fmt.Sprintf("%s via %s at +%v: ", r.key, r.via, r.start.Sub(ev.replaceStart).Round(time.Millisecond))+fmt.Sprintf(format, a...))
		} else if len(rep.failures) == 30 {
			rep.failures = append(rep.failures, "… more failures")
		}
	}
	replaced := func(k reqKey) bool { return strings.Contains(k.path, "/stores/cells") }
	deadline := ev.replaceEnd.Add(fleetBound)
	rep.firstV2 = -1
	for _, r := range records {
		if r.via == "nginx" {
			rep.viaLB++
		}
		if r.err != nil {
			// Only answers in flight on the killed replica may fail, and
			// only visibly (an error, which this is).
			onVictim := r.via == ev.killed.name || (r.via == "nginx" && replicaAt([]*replica{ev.killed}, r.upstream) != nil)
			if onVictim && r.start.Before(ev.killAt) && !r.end.Before(ev.killAt) {
				rep.cut++
				continue
			}
			fail(r, "failed: %v", r.err)
			continue
		}
		rk := r.key
		rk.method = http.MethodGet // a HEAD is judged by its GET's answer
		a1, ok1 := refs1[rk]
		a2, ok2 := refs2[rk]
		isV1 := ok1 && matches(r, a1)
		isV2 := ok2 && matches(r, a2)
		switch {
		case isV1 && isV2:
		case isV1:
			if replaced(r.key) {
				rep.v1++
				if d := r.start.Sub(ev.replaceStart); d > rep.lastV1 {
					rep.lastV1 = d
				}
				if r.start.After(deadline) {
					fail(r, "the old version's answer %v after the replacement ended (the bound is %v)", r.start.Sub(ev.replaceEnd).Round(time.Millisecond), fleetBound)
				}
			}
		case isV2:
			rep.v2++
			if d := r.start.Sub(ev.replaceStart); rep.firstV2 < 0 || d < rep.firstV2 {
				rep.firstV2 = d
			}
		case r.ans.status == http.StatusServiceUnavailable && r.ans.retryAfter != "" && replaced(r.key) &&
			(r.ans.problem == "store-changing" || r.key.method == http.MethodHead): // a HEAD's problem has no body to name it
			rep.changing++
			if r.start.Before(ev.replaceStart) || r.start.After(deadline) {
				fail(r, "503 store-changing outside the replacement")
			}
		case r.ans.status == http.StatusConflict && r.ans.problem == "stale-cursor" && replaced(r.key) && ok1 && !ok2:
			rep.stale++ // a v1 cursor after the store moved to v2
		default:
			fail(r, "%d %s (%d bytes, etag %s) is neither version's single-node answer (v1: %d %s, v2: %d %s)",
				r.ans.status, r.ans.problem, r.ans.size, r.ans.etag, a1.status, a1.etag, a2.status, a2.etag)
			continue
		}
		if r.ans.status == http.StatusNotModified {
			rep.notModified++
		}
	}
	return rep
}

// matches: r got ref's answer; a HEAD has ref's status and ETag and no
// body; a conditional request with ref's ETag got a 304.
func matches(r record, ref answer) bool {
	switch {
	case r.inm != "" && r.inm == ref.etag && ref.status == http.StatusOK:
		return r.ans.status == http.StatusNotModified && r.ans.etag == ref.etag
	case r.key.method == http.MethodHead:
		return r.ans.status == ref.status && r.ans.etag == ref.etag && r.ans.size == 0
	}
	return r.ans.same(ref)
}

// makeBucket creates the bucket unless it exists, with the credentials
// the replicas take from the environment too.
func makeBucket(t *testing.T, env fleetEnv, bucket string) {
	t.Helper()
	cl := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(env.endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), "")})
	_, err := cl.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}
