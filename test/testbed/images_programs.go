package testbed

import (
	"fmt"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// NonrootUID is the numeric user of the static base (distroless' and
// Chainguard's "nonroot"): the kubelet can check runAsNonRoot only against
// a number.
const NonrootUID = 65532

// HostCABundle is Debian's CA bundle (package ca-certificates), copied into
// the images that need one.
const HostCABundle = "/etc/ssl/certs/ca-certificates.crt"

// koPath is the PATH ko gives the images it builds.
const koPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/ko-app"

// staticBase is the file system of distroless' static image, which ko
// builds Knative's and Tekton's images on: users root and nonroot, CA
// certificates, a sticky /tmp and nonroot's home. No shell, no libc.
func staticBase() []layerFile {
	nonroot := fmt.Sprint(NonrootUID)
	return []layerFile{
		{path: "/etc/passwd", data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:" + nonroot + ":" + nonroot + ":nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "/etc/group", data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:" + nonroot + ":\n")},
		{path: "/etc/nsswitch.conf", data: []byte("hosts: files dns\n")},
		{path: "/etc/ssl/certs/ca-certificates.crt", src: HostCABundle, mode: 0o644},
		{path: "/tmp", dir: true, mode: 0o1777},
		{path: "/root", dir: true, mode: 0o700},
		{path: "/home/nonroot", dir: true, mode: 0o700, uid: NonrootUID, gid: NonrootUID},
	}
}

// koImage is a static program laid out as ko lays it out: /ko-app/<name>
// on the static base, run as nonroot, with ko's environment.
func koImage(name, bin string) (v1.Image, error) {
	if err := staticBinary(bin); err != nil {
		return nil, fmt.Errorf("%s image: %w", name, err)
	}
	files := append(staticBase(),
		layerFile{path: "/ko-app/" + name, src: bin, mode: 0o755},
		layerFile{path: "/var/run/ko", dir: true})
	return binaryImage(name, files, imageConfig{
		Entrypoint: []string{"/ko-app/" + name},
		Env:        []string{koPath, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "KO_DATA_PATH=/var/run/ko"},
		User:       uidString(NonrootUID, NonrootUID),
	})
}

// TektonStepPrograms are the programs Tekton's controller puts into every
// TaskRun pod, each an image of its own (the controller's -entrypoint-image,
// -nop-image, -workingdirinit-image and -sidecarlogresults-image).
var TektonStepPrograms = []string{"entrypoint", "nop", "workingdirinit", "sidecarlogresults"}

// KnativePrograms are Knative Serving's data plane: the activator and the
// autoscaler run as pods, the queue as every revision's sidecar.
var KnativePrograms = []string{"activator", "autoscaler", "queue"}

// ProgramImage is one of TektonStepPrograms or KnativePrograms as ko
// builds it, from the static binary of that name in dir (ImageProgramsDir).
func ProgramImage(dir, name string) (v1.Image, error) {
	return koImage(name, filepath.Join(dir, name))
}

// KanikoImage is kaniko's executor laid out as its Dockerfile lays it out
// (deploy/Dockerfile of v1.23.2): the executor and a CA bundle under
// /kaniko, run as root (it unpacks base images over its own root), in
// /workspace. The credential helpers for cloud registries are left out:
// the bed's registry takes a Docker config.
func KanikoImage(executor string) (v1.Image, error) {
	if err := staticBinary(executor); err != nil {
		return nil, fmt.Errorf("kaniko image: %w", err)
	}
	files := []layerFile{
		{path: "/kaniko/executor", src: executor, mode: 0o755},
		{path: "/kaniko/ssl/certs/ca-certificates.crt", src: HostCABundle, mode: 0o644},
		{path: "/kaniko/.docker", dir: true},
		{path: "/etc/nsswitch.conf", data: []byte("hosts: files dns\n")},
		{path: "/workspace", dir: true},
		{path: "/root", dir: true, mode: 0o700},
	}
	return binaryImage("kaniko", files, imageConfig{
		Entrypoint: []string{"/kaniko/executor"},
		Env: []string{"HOME=/root", "USER=root", "PATH=/usr/local/bin:/kaniko",
			"SSL_CERT_DIR=/kaniko/ssl/certs", "DOCKER_CONFIG=/kaniko/.docker/"},
		WorkingDir: "/workspace",
	})
}

// SlessImage is sless's own image as the Dockerfile at the repository's
// root makes it: the static binary at /sless on the static base, run as
// 65532 (the trigger and job pods' user).
func SlessImage(bin string) (v1.Image, error) {
	if err := staticBinary(bin); err != nil {
		return nil, fmt.Errorf("sless image: %w", err)
	}
	files := append(staticBase(), layerFile{path: "/sless", src: bin, mode: 0o755})
	return binaryImage("sless", files, imageConfig{
		Entrypoint: []string{"/sless"},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		User:       uidString(NonrootUID, NonrootUID),
	})
}
