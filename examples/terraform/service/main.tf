# A web app as a sless service: a WSGI app built from ./web, one instance
# kept up (min_scale), at most three, with a greeting kept in a secret.
# It answers at <endpoint>/svc/<namespace>/web-tf/ with the whole path
# passed through.
#
#   export SLESS_ENDPOINT=http://127.0.0.1:8080 SLESS_TOKEN=...
#   terraform apply
#
# See ../main.tf for how the provider is found without a registry.

terraform {
  required_providers {
    sless = {
      source = "sless-dev/sless"
    }
  }
}

provider "sless" {}

variable "greeting" {
  type      = string
  default   = "Hello"
  sensitive = true
}

variable "source_dir" {
  description = "Directory of the app's code; ./web beside this file when unset."
  type        = string
  default     = null
}

resource "sless_secret" "greeting" {
  name = "web-tf-greeting"
  data = { greeting = var.greeting }
}

resource "sless_service" "web" {
  name       = "web-tf"
  runtime    = "python3.12"
  entrypoint = "app.app"
  source_dir = coalesce(var.source_dir, "${path.module}/web")
  max_scale  = 3

  secret_env = {
    GREETING = { secret = sless_secret.greeting.name, key = "greeting" }
  }
}

output "url" {
  value = sless_service.web.url
}
