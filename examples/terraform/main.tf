# A complete sless configuration: a Python function built from ./hello, a
# public HTTP route to it, a schedule that calls it every five minutes, and a
# one-shot job that runs it once on a payload.
#
#   export SLESS_ENDPOINT=http://127.0.0.1:8080 SLESS_TOKEN=...   # e.g. `sless dev`
#   terraform apply
#
# The provider is not in a registry: docs/terraform.md says how to build it
# and point the CLI at it with dev_overrides, under which `terraform init` is
# skipped (it would look the provider up in the registry and fail).

terraform {
  required_providers {
    sless = {
      source = "sless-dev/sless"
    }
  }
}

# endpoint and token come from SLESS_ENDPOINT and SLESS_TOKEN; the namespace
# is the token's own unless set here.
provider "sless" {}

variable "greeting" {
  type    = string
  default = "Hello"
}

variable "source_dir" {
  description = "Directory of the function's code; ./hello beside this file when unset."
  type        = string
  default     = null
}

resource "sless_function" "hello" {
  name        = "hello-tf"
  runtime     = "python3.12"
  entrypoint  = "main.handler"
  source_dir  = coalesce(var.source_dir, "${path.module}/hello")
  memory_mb   = 128
  timeout_sec = 10

  env = {
    GREETING = var.greeting
  }

  scale = {
    min = 0
    max = 3
  }

  wait_timeout = "5m"
}

resource "sless_trigger" "public" {
  name     = "hello-tf-http"
  function = sless_function.hello.name
  type     = "http"
}

resource "sless_trigger" "every_five_minutes" {
  name      = "hello-tf-cron"
  function  = sless_function.hello.name
  type      = "cron"
  schedule  = "*/5 * * * *"
  time_zone = "Europe/Berlin"
  payload   = jsonencode({ name = "cron" })
}

resource "sless_job" "once" {
  name     = "hello-tf-once"
  function = sless_function.hello.name
  run_id   = 1
  payload  = jsonencode({ name = "job" })
}

output "url" {
  value = sless_function.hello.url
}

output "public_url" {
  value = sless_trigger.public.url
}

output "job_output" {
  value = sless_job.once.output
}
