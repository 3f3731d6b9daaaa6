// The names of what a FunctionJob's runs make.

package names

import (
	"strconv"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Job of one run: the FunctionJob's name and the run id. FunctionJob names
// are at most 40 characters and a run id at most 19 digits, so the name fits
// the 63 characters a Job's name may have (it becomes a label value).
func Job(j *slessv1alpha1.FunctionJob, runID int64) string {
	return j.Name + "-" + strconv.FormatInt(runID, 10)
}
