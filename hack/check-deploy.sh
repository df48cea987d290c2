#!/usr/bin/env bash
# Checks the deployment files without a container engine (`make check-deploy`):
#  1. the relay builds with exactly the Dockerfile's command into a static binary that runs:
#     --version prints the version stamped in, --help lists the variables, and no
#     configuration exits 2 naming RELAY_RESOURCES;
#  2. the Dockerfile converts to a build graph with BuildKit's own frontend, passes its
#     linter, and keeps the image's promises (hack/tools/compose/cmd/dockerfile-check);
#  3. docker-compose.yml loads with compose-go, the docker compose CLI's loader
#     (hack/tools/compose/cmd/compose-check), with each of its profiles (kubeconfig, k3s);
#  4. the relay accepts the environment the image and compose give it: with that environment
#     its only complaint is the kubeconfig, which exists only inside the container.
# Not checked here: that the image builds and runs (needs an engine and the base images),
# and that the compose services start and reach a cluster.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bin="${TESTENV_BIN_DIR:-$root/.bin}"
mkdir -p "$bin"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The Dockerfile's build command; dockerfile-check requires it there verbatim, with
# CGO_ENABLED=0, so that this script builds what the image ships. VERSION is the Dockerfile's
# build argument; here it is a value that only the stamping can have put into the binary.
go_build='go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /relay ./cmd/relay'
VERSION="v0.0.0-check-deploy.$$"

fail() { echo "check-deploy: $*" >&2; exit 1; }

echo "== static build: VERSION=$VERSION CGO_ENABLED=0 ${go_build/\/relay /$tmp/relay }"
# The same command, word for word, as the Dockerfile's RUN runs it (sh -c, VERSION set).
(export VERSION CGO_ENABLED=0 && sh -c "${go_build/\/relay /$tmp/relay }")
# readelf comes with binutils, which gcc (needed for the test bed) depends on.
command -v readelf >/dev/null || fail "readelf is needed (binutils, installed with gcc)"
# A statically linked executable has no program interpreter and no dynamic section.
if readelf -lW "$tmp/relay" | grep -q 'INTERP' || ! readelf -dW "$tmp/relay" | grep -q 'no dynamic section'; then
	readelf -lW "$tmp/relay" | grep -i interp || true
	fail "relay binary is not statically linked"
fi
echo "relay binary: statically linked ($(readelf -hW "$tmp/relay" | awk -F: '/Machine/ {gsub(/^ +/, "", $2); print $2}'))"
buildinfo="$(go version -m "$tmp/relay")"
grep -qx $'\tbuild\tCGO_ENABLED=0' <<<"$buildinfo" || fail "relay binary was not built with CGO_ENABLED=0"
grep -qx $'\tbuild\t-trimpath=true' <<<"$buildinfo" || fail "relay binary was not built with -trimpath"
echo "build info: $(grep -E $'\tbuild\t(CGO_ENABLED|-trimpath|GOOS|GOARCH)=' <<<"$buildinfo" | cut -f3 | tr '\n' ' ')"

echo "== relay --version"
got="$(env -i "$tmp/relay" --version)" || fail "relay --version exited $?"
echo "$got"
[[ "$got" == "relay $VERSION" ]] || fail "relay --version printed \"$got\", want \"relay $VERSION\" (the stamped version)"

echo "== relay --help"
help="$(env -i "$tmp/relay" --help 2>&1)" || fail "relay --help exited $?"
for v in RELAY_RESOURCES NATS_URL KUBECONFIG RELAY_NATS_DATA_DIR RELAY_NATS_LISTEN; do
	grep -qE "^$v[[:space:]]" <<<"$help" || fail "relay --help does not list $v"
done
echo "exit 0, lists $(grep -cE '^(RELAY_|NATS_URL[[:space:]]|KUBECONFIG[[:space:]])' <<<"$help") variables"

echo "== relay without configuration"
rc=0
out="$(env -i "$tmp/relay" 2>&1)" || rc=$?
echo "$out"
[[ $rc -eq 2 ]] || fail "relay without configuration exited $rc, want 2"
grep -q 'RELAY_RESOURCES' <<<"$out" || fail "relay without configuration does not name RELAY_RESOURCES"

echo "== deployment checkers (hack/tools/compose)"
(cd hack/tools/compose && go build -o "$bin/" ./cmd/compose-check ./cmd/dockerfile-check)

echo "== Dockerfile"
# Every file of this module that the relay's packages compile or embed must reach the builder.
mapfile -t need < <(go list -deps -f '{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}' ./cmd/relay | sed "s|^$root/||" | grep .)
need_args=(-need go.mod -need go.sum)
for f in "${need[@]}"; do need_args+=(-need "$f"); done
"$bin/dockerfile-check" -context . -go-build "$go_build" "${need_args[@]}" -env-out "$tmp/image.env" Dockerfile
echo "(.dockerignore keeps the ${#need[@]} source files of ./cmd/relay and its packages)"

echo "== docker-compose.yml (variables at their defaults), profile kubeconfig"
"$bin/compose-check" -profile kubeconfig -service relay -env-out "$tmp/compose.env" docker-compose.yml
echo "== docker-compose.yml, profile k3s"
"$bin/compose-check" -profile k3s -service relay-k3s -env-out "$tmp/compose-k3s.env" docker-compose.yml

# expect_only_kubeconfig NAME ENVFILE...: runs the relay with exactly the variables in the
# files (later files override earlier ones, as compose overrides the image's ENV) and
# KUBECONFIG at a path that does not exist here; the configuration is accepted when the
# only problem reported is that kubeconfig.
expect_only_kubeconfig() {
	local name="$1"
	shift
	local -a envs
	mapfile -t envs < <(cat "$@" | grep .)
	rc=0
	out="$(env -i "${envs[@]}" "$tmp/relay" 2>&1)" || rc=$?
	echo "$name: exit $rc: $(tr '\n' ' ' <<<"$out")"
	[[ $rc -eq 2 ]] || fail "$name: relay exited $rc, want 2 (only the kubeconfig missing)"
	problems="$(grep -E '^[A-Z_]+=' <<<"$out" || true)"
	[[ "$(grep -c . <<<"$problems")" -eq 1 && "$problems" == KUBECONFIG=* ]] ||
		fail "$name: relay rejects more than the kubeconfig: $problems"
}

echo "== the relay accepts the environment of the image and of compose"
expect_only_kubeconfig "image + compose (kubeconfig)" "$tmp/image.env" "$tmp/compose.env"
expect_only_kubeconfig "image + compose (k3s)" "$tmp/image.env" "$tmp/compose-k3s.env"
printf 'RELAY_RESOURCES=pods\nKUBECONFIG=%s\n' "$tmp/missing/kubeconfig" >"$tmp/run.env"
expect_only_kubeconfig "image alone (embedded nats-server)" "$tmp/image.env" "$tmp/run.env"

echo "check-deploy: ok"
