// Command terraform-provider-sless is sless's Terraform (and OpenTofu)
// provider. Terraform starts it; run it with -debug to attach a debugger
// (it prints the TF_REATTACH_PROVIDERS value to use).
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/sless-dev/sless/pkg/tfprovider"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run in debug mode, for debuggers such as delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), tfprovider.New(version), providerserver.ServeOpts{
		Address: tfprovider.ProviderAddress,
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
