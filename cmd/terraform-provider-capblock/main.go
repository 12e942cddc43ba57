// Command terraform-provider-capblock is capblock's Terraform provider: it
// manages capacity blocks, training plans, teams, quotas, budgets and
// webhooks through a capblock server's HTTP API (docs/terraform.md).
// Terraform or OpenTofu starts it; it is not run by hand.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"capblock/internal/tfprovider"
)

func main() {
	debug := flag.Bool("debug", false, "run under a debugger: print the TF_REATTACH_PROVIDERS value to use and serve until interrupted")
	flag.Parse()
	err := providerserver.Serve(context.Background(), tfprovider.New(tfprovider.Version), providerserver.ServeOpts{
		Address: tfprovider.Address,
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
