package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// deployedContainerfile is the operator's image recipe.
const deployedContainerfile = "../../docs/deploy/Containerfile"

// ociConfig is the part of an OCI image configuration the test checks.
type ociConfig struct {
	Config struct {
		User         string
		Entrypoint   []string
		ExposedPorts map[string]struct{}
	} `json:"config"`
}

// ociDescriptor names a blob of an OCI layout.
type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
}

// TestContainerImage builds docs/deploy/Containerfile the way docs/deploy.md
// says (a static binary, the CA certificates, buildah or podman, no
// network: the base is scratch), exports the image as an OCI layout and
// checks it: the entrypoint runs serve as a non-root user, the binary is
// static (a scratch image has no libc to load) and is this tree's serve,
// and the certificates for https object storage are where Go looks.
// Skips without buildah or podman, unless ZVFSERVE_REQUIRE_CONTAINER=1.
// End to end: it runs with ZVFSERVE_E2E=1 (or ZVFSERVE_REQUIRE_CONTAINER=1).
func TestContainerImage(t *testing.T) {
	zvftest.EndToEnd(t, "ZVFSERVE_REQUIRE_CONTAINER")
	t.Parallel()
	if testing.Short() || raceBuild {
		t.Skip("builds a static zvfserve (a full compile on a cold cache); not with -short or -race")
	}
	builder := ""
	for _, b := range []string{"buildah", "podman"} {
		if p, err := exec.LookPath(b); err == nil {
			builder = p
			break
		}
	}
	const certs = "/etc/ssl/certs/ca-certificates.crt"
	_, certErr := os.Stat(certs)
	if builder == "" || certErr != nil {
		msg := fmt.Sprintf("the container test needs buildah or podman (Debian packages; .ci/run installs buildah) and %s", certs)
		if os.Getenv("ZVFSERVE_REQUIRE_CONTAINER") == "1" {
			t.Fatal(msg + ", and ZVFSERVE_REQUIRE_CONTAINER=1")
		}
		t.Skip(msg)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the container test builds zvfserve with the go command, which is not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	buildCtx := filepath.Join(dir, "build")
	run := func(name string, env []string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
	}
	// The recipe of docs/deploy.md, step by step.
	began := time.Now()
	run(goBin, []string{"CGO_ENABLED=0"}, "build", "-trimpath", "-ldflags=-s", "-o", filepath.Join(buildCtx, "zvfserve"), ".")
	built := time.Since(began)
	b, err := os.ReadFile(certs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(buildCtx, "ca-certificates.crt"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Own storage in the test's folder: nothing of the machine's images is
	// touched, and nothing is pulled (scratch is no image).
	storageFlags := []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs"}
	build := "bud"
	if filepath.Base(builder) == "podman" {
		build = "build"
	}
	run(builder, nil, append(storageFlags, build, "--pull=never", "-f", deployedContainerfile, "-t", "localhost/zvfserve-test", buildCtx)...)
	layout := filepath.Join(dir, "oci")
	run(builder, nil, append(storageFlags, "push", "localhost/zvfserve-test", "oci:"+layout)...)

	cfg, files := readOCILayout(t, layout)
	if want := []string{"/zvfserve", "serve"}; !slices.Equal(cfg.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", cfg.Config.Entrypoint, want)
	}
	if u := cfg.Config.User; u == "" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root") {
		t.Errorf("the image runs as %q; want a non-root user", u)
	}
	if _, ok := cfg.Config.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v, want 8080/tcp (serve's default --addr)", cfg.Config.ExposedPorts)
	}
	if !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"].data, b) {
		t.Errorf("the image lacks %s", certs)
	}
	bin, ok := files["zvfserve"]
	if !ok {
		t.Fatalf("the image has no /zvfserve: %v", slices.Sorted(maps.Keys(files)))
	}
	if bin.mode&0o111 == 0 {
		t.Errorf("/zvfserve has mode %v; not executable", bin.mode)
	}
	exe := filepath.Join(dir, "zvfserve-from-image")
	if err := os.WriteFile(exe, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/zvfserve is dynamically linked; a scratch image has no loader or libc")
		}
	}
	f.Close()
	// The binary in the image is this tree's serve: its help names the
	// flags the Kubernetes manifests use.
	out, _ := exec.CommandContext(ctx, exe, "serve", "--help").CombinedOutput()
	for _, flag := range []string{"-shutdown-delay", "-shutdown-grace", "-revalidate", "-settle"} {
		if !strings.Contains(string(out), flag) {
			t.Errorf("serve --help of the image's binary lacks %s:\n%s", flag, out)
		}
	}
	t.Logf("container image: static binary %.1f MiB (built in %v), image built and exported with %s in %v",
		float64(len(bin.data))/(1<<20), built.Round(time.Second), filepath.Base(builder), (time.Since(began) - built).Round(time.Second))
}

// imageFile is a regular file of an image's root.
type imageFile struct {
	mode os.FileMode
	data []byte
}

// readOCILayout reads the single image of an OCI layout: its configuration
// and the regular files of its layers, applied in order.
func readOCILayout(t *testing.T, layout string) (ociConfig, map[string]imageFile) {
	t.Helper()
	blob := func(digest string) []byte {
		t.Helper()
		alg, hex, ok := strings.Cut(digest, ":")
		if !ok {
			t.Fatalf("digest %q", digest)
		}
		b, err := os.ReadFile(filepath.Join(layout, "blobs", alg, hex))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var index struct{ Manifests []ociDescriptor }
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests", err, len(index.Manifests))
	}
	var manifest struct {
		Config ociDescriptor
		Layers []ociDescriptor
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var cfg ociConfig
	if err := json.Unmarshal(blob(manifest.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	files := map[string]imageFile{}
	for _, l := range manifest.Layers {
		var r io.Reader = bytes.NewReader(blob(l.Digest))
		if strings.HasSuffix(l.MediaType, "+gzip") {
			zr, err := gzip.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(filepath.Clean("/"+h.Name), "/")] = imageFile{mode: h.FileInfo().Mode(), data: data}
		}
	}
	return cfg, files
}
