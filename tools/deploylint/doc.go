// Package deploylint checks timemachine's packaging files without Docker or
// systemd running: the Dockerfile and .dockerignore, deploy/compose.yaml and
// deploy/timemachine.service. Its tests (`make lint`, `make test`) run the
// checks on the repository's files, and on broken examples to show that each
// rule can fail.
//
// It is a module of its own so that BuildKit and compose-go, which only these
// checks need, stay out of the server's go.mod.
//
//   - Dockerfile: BuildKit's own build checks (what `docker build --check`
//     runs: the Dockerfile frontend with an offline image resolver, so no
//     registry is asked), then rules in the spirit of hadolint (pinned base
//     images, no latest, COPY not ADD, a non-root USER, a HEALTHCHECK, exec
//     form, pinned packages, pipefail, ...) and the project's own (the builder's
//     Go is go.mod's, a static -trimpath build with cache mounts, the data
//     volume and ports the server uses, `timemachine server` as entrypoint).
//   - .dockerignore: read with BuildKit's pattern matcher; what the build needs
//     is in the context, history and build output are not.
//   - compose: loaded and validated by compose-go (the loader of docker
//     compose, with the compose JSON schema), then checked as a cluster: three
//     nodes with distinct ids, --bind-addr/--serf-addr on each node's fixed IP,
//     --join naming the others, --bootstrap-expect equal to the node count,
//     named data volumes, loopback-only ports while there is no --auth-file, a
//     stop grace period long enough for the leadership hand-off.
//   - systemd unit: the hardening and lifecycle settings it must have, and
//     `systemd-analyze verify` and `security --offline` when systemd-analyze
//     is installed.
package deploylint
