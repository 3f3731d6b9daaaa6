package tfprovider

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// A job whose run cannot start says why when the apply's wait ends: the
// job's Ready condition (its function does not exist), not only its phase.
func TestAccJobWaitSaysWhyTheRunDidNotStart(t *testing.T) {
	startAPI(t)
	name := "tf-nofnj-" + fmt.Sprint(time.Now().UnixNano()%100000)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		Steps: []resource.TestStep{{
			Config: hcl("", fmt.Sprintf(`resource "sless_job" "j" {
  name         = %q
  function     = "not-there"
  wait_timeout = "3s"
}
`, name)),
			ExpectError: regexp.MustCompile(`(?s)did not finish within 3s.*"Pending".*FunctionNotFound: Function not-there\s+does not exist`),
		}},
	})
}
