# timemachine: a small image that runs `timemachine server`.
# docs/operations.md, "Packaging and deployment", describes building and
# running it; deploy/compose.yaml runs three nodes.
#
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" -t timemachine .
#   docker run -p 127.0.0.1:8080:8080 -v tmdata:/data timemachine
#
# Needs BuildKit (Docker's default builder since 23.0) for the cache mounts.
# Checked offline by tools/deploylint (make lint): BuildKit's own build
# checks plus hadolint-style rules.

# Keep in step with the go directive in go.mod (deploylint checks it).
ARG GO_VERSION=1.26.8

# build: a static binary, cross-compiled on the build machine's platform for
# the target's (docker buildx build --platform linux/amd64,linux/arm64 .).
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
# The flags of `make release` (scripts/release.sh), plus timetzdata: the run
# stage has no /usr/share/zoneinfo, so the binary carries its own zone data.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} GOAMD64=v1 GOARM64=v8.0 \
    go build -trimpath -buildvcs=false -tags timetzdata \
      -ldflags="-s -w -buildid= -X main.version=${VERSION}" \
      -o /out/timemachine ./cmd/timemachine
# The few files the scratch stage needs: an unprivileged user, a data
# directory it owns, a /tmp.
RUN mkdir -p /rootfs/etc /rootfs/data /rootfs/tmp \
 && echo 'timemachine:x:65532:65532:timemachine:/data:/nonexistent' >/rootfs/etc/passwd \
 && echo 'timemachine:x:65532:' >/rootfs/etc/group

# run: nothing but the binary, CA certificates (callbacks go to https
# receivers) and the files above. No shell: the HEALTHCHECK and
# `docker exec … timemachine admin status` use the binary itself.
FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title="timemachine" \
      org.opencontainers.image.description="A distributed, durable timer database: one-shot jobs fired as webhooks at their time" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /rootfs/etc/passwd /rootfs/etc/group /etc/
COPY --from=build --chown=65532:65532 /rootfs/data /data
COPY --from=build --chmod=1777 /rootfs/tmp /tmp
COPY --from=build /out/timemachine /usr/local/bin/timemachine

# Container defaults (every flag reads TIMEMACHINE_<FLAG>; flags given to
# `docker run … timemachine ARGS` win). The HTTP API listens on every
# interface of the container so a published port reaches it; publish it on
# 127.0.0.1 or put --auth-file on it (API.md §6). --bind-addr and --serf-addr
# stay on loopback, which is right for one node: a node advertises these
# addresses to its peers as they are, so in a cluster each node sets them to
# its own routable IP (deploy/compose.yaml shows how).
ENV TIMEMACHINE_DATA_DIR=/data \
    TIMEMACHINE_HTTP_ADDR=0.0.0.0:8080
VOLUME ["/data"]
WORKDIR /data
# 8080 HTTP API; 7000 raft and node-to-node RPC; 7946 gossip (TCP and UDP).
EXPOSE 8080/tcp 7000/tcp 7946/tcp 7946/udp
USER 65532:65532
# SIGTERM hands leadership off and lets callbacks in flight finish (up to
# 15 s): give `docker stop` time for it (docker stop -t 60, compose's
# stop_grace_period).
STOPSIGNAL SIGTERM
# Alive = the process serves HTTP (/healthz, open even with --auth-file).
# Readiness (/readyz) is for load balancers: `timemachine health --ready`.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/timemachine", "health", "--timeout", "4s"]
ENTRYPOINT ["/usr/local/bin/timemachine", "server"]
