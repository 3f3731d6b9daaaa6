package serving

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/build"
	"github.com/sless-dev/sless/pkg/logs"
)

// Logs is logs.Source for sless dev: a function's output is
// <LogDir>/<namespace>/<name>.log and its rotated files (Server), a
// service's <LogDir>/_services/<namespace>/<name>.log (ServicesDir), a
// build's <builds>/<digest>.log (Builder).
type Logs struct {
	LogDir  string
	Builder *build.Builder
}

var _ logs.Source = (*Logs)(nil)

// ServicesDir is the directory under sless dev's log and serving-state
// directories that holds SlessServices' files, apart from Functions' of
// the same name; no namespace is named so (a DNS label has no underscore).
const ServicesDir = "_services"

// Function reads the function's (or service's) log files.
func (l *Logs) Function(ctx context.Context, fn slessv1alpha1.Workload, q logs.Query, emit logs.Emit) error {
	dir := l.LogDir
	if fn.WorkloadKind() == slessv1alpha1.KindSlessService {
		dir = filepath.Join(dir, ServicesDir)
	}
	p := filepath.Join(dir, fn.GetNamespace(), fn.GetName()+".log")
	return logs.Files(ctx, p, fn.GetName(), q, nil, emit)
}

var buildSuffixRE = regexp.MustCompile(`^[a-f0-9]{10}$`)

// Build reads the log of fn's build named build (BuildName). Following a
// build that runs ends when it does.
func (l *Logs) Build(ctx context.Context, fn slessv1alpha1.Workload, build string, q logs.Query, emit logs.Emit) error {
	short, ok := strings.CutPrefix(build, fn.GetName()+"-build-")
	if !ok || !buildSuffixRE.MatchString(short) {
		return fmt.Errorf("%w: %s is not a build of %s %s", logs.ErrNotFound, build, fn.WorkloadKind(), fn.GetName())
	}
	path, stop, err := l.Builder.LogOf(short)
	if err != nil {
		return err
	}
	if !q.Follow {
		stop = nil
	} else if stop == nil {
		q.Follow = false // it has ended: nothing more will come
	}
	return logs.Files(ctx, path, build, q, stop, emit)
}
