# kube-nats-relay: a static relay binary on an empty base image.
#
#   docker build --build-arg VERSION=v1.2.3 -t kube-nats-relay:v1.2.3 .
#   docker run --rm kube-nats-relay:v1.2.3 --version
#   docker run --rm kube-nats-relay:v1.2.3 --help      # every environment variable with its default
#
# Needs BuildKit (the default builder since Docker Engine 23) for the build-cache mount.
# The relay is configured only through environment variables (see `relay --help`). Without
# NATS_URL it starts an embedded nats-server that keeps JetStream data in /data.
# hack/check-deploy.sh checks this file with BuildKit's own parser and builds the binary with
# the same flags, without a container engine.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
# Set by BuildKit for `docker buildx build --platform ...`; empty means the build machine's.
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src

# Modules in their own layer: source edits do not download them again.
COPY go.mod go.sum ./
RUN go mod download && go mod verify

COPY . .
# The release the binary reports (`relay --version`, the "relay started" log line).
ARG VERSION=dev
# Static (no cgo, so no libc in the image), reproducible paths, no symbol tables, the version
# stamped in.
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /relay ./cmd/relay

# The final image has no shell to create these: the data directory of the embedded
# nats-server, owned by the relay's user so that a fresh volume on /data is writable, and
# passwd/group entries so that tools show a name for that user.
RUN mkdir -p /rootfs/data /rootfs/etc \
    && echo 'nonroot:x:65532:65532:nonroot:/data:/sbin/nologin' >/rootfs/etc/passwd \
    && echo 'nonroot:x:65532:' >/rootfs/etc/group

FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title="kube-nats-relay" \
      org.opencontainers.image.version="${VERSION}"
# CA certificates for TLS to NATS (RELAY_NATS_TLS_CA adds a private CA) and to the apiserver
# when a kubeconfig names no CA.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /rootfs/etc/ /etc/
COPY --from=build --chown=65532:65532 /rootfs/data /data
COPY --from=build /relay /relay

# Used only when NATS_URL is empty. The embedded server keeps the relay's own default,
# RELAY_NATS_LISTEN=127.0.0.1:4222: only the relay (and `relay tail` inside the container)
# reach it. To serve consumers, set RELAY_NATS_LISTEN=0.0.0.0:4222 together with
# credentials (RELAY_NATS_TOKEN, say), which the embedded server then requires; without
# them the relay refuses to listen beyond loopback (exit 2).
ENV RELAY_NATS_DATA_DIR=/data
VOLUME /data
EXPOSE 4222

USER 65532:65532
ENTRYPOINT ["/relay"]
