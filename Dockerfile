# The sless image: one static binary that is the controller (`controller`),
# the REST API and invoke proxy (`api`), and the cron and queue caller pods
# (`cron-call`, `consume`); the manifests and the trigger controller pass the
# subcommand as args.
#
#   docker build --build-arg VERSION=$(git describe --always) --build-arg COMMIT=$(git rev-parse HEAD) -t REGISTRY/sless .
#
# Push it and install it by digest (docs/install.md). config/image_test.go
# checks that the build line below makes a static binary that runs as the
# user below.

FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags timetzdata -ldflags="-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/sless ./cmd/sless

# distroless/static: CA certificates, no shell; the time zones of cron
# triggers are in the binary (timetzdata). The user is numeric so that the
# kubelet can enforce runAsNonRoot; 65532 is the one the trigger pods run as.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sless /sless
USER 65532:65532
ENTRYPOINT ["/sless"]
