#!/usr/bin/env bash
# Builds the Dockerfile (both targets) with a real builder and runs the `full` image on a pinned npm server
# (npx) and a pinned PyPI server (uvx): `prompt-gateway check` and `list` inside the container must show
# both servers' prompts. CI runs it as root on a machine with no Docker daemon and no registry of images,
# so it uses podman (Debian's package) and a base image it makes itself with debootstrap in place of
# python:3.12-slim (the Dockerfile's BASE build argument). Everything it makes lives in a temporary
# directory (podman's storage too) and is removed at the end: nothing is cached between runs.
#
# What this checks: the Dockerfile as written builds (default and `full` targets); the full image holds
# node, npx, uv and uvx on PATH, runs as uid 10001 and starts real npx and uvx upstreams that fetch their
# packages from the registries at run time; the slim image holds no Node. What it does not check: the
# python:3.12-slim base itself (here: Debian's python3 of the host's release), Docker's own builder
# (BuildKit) and runtime (podman's buildah and runc read the same file and run the same image format).
set -euo pipefail
cd "$(dirname "$0")/.."

NPM_SERVER="@modelcontextprotocol/server-everything@2026.8.31"
PYPI_SERVER="mcp-server-fetch==2026.10.24"
# shellcheck disable=SC1091
SUITE="${CHECK_IMAGE_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}"
MIRROR="${CHECK_IMAGE_MIRROR:-$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

if [ "$(id -u)" != 0 ]; then
  echo "check-image.sh: run it as root (debootstrap and podman's storage need it)" >&2
  exit 2
fi
for tool in podman debootstrap runc; do
  command -v "$tool" >/dev/null || missing="${missing:-} $tool"
done
if [ -n "${missing:-}" ]; then
  # shellcheck disable=SC2086
  { apt-get install -y -qq $missing || { apt-get update -qq && apt-get install -y -qq $missing; }; } >/dev/null
fi

work="$(mktemp -d /tmp/check-image.XXXXXX)"
podman=(podman --root "$work/storage" --runroot "$work/run" --storage-driver overlay)
cleanup() {
  "${podman[@]}" rm --all --force >/dev/null 2>&1 || true
  "${podman[@]}" rmi --all --force >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

start=$SECONDS
step() { printf '\n== check-image [%ss]: %s\n' "$((SECONDS - start))" "$*"; }

step "a Debian $SUITE base (debootstrap minbase + python3, venv, ca-certificates from $MIRROR)"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  "$SUITE" "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
# Where the machine reaches the registries through a TLS-inspecting proxy, its CA must be trusted inside
# too: the base gets the host's local CAs (none on most machines), and pip is told to use the system store.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$work/rootfs/usr/local/share/ca-certificates/"
  chroot "$work/rootfs" update-ca-certificates >/dev/null 2>&1
fi
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$work/rootfs/etc/pip.conf"
rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
tar -C "$work/rootfs" -c . | "${podman[@]}" import --quiet - localhost/check-image-base:"$SUITE" >/dev/null
rm -rf "$work/rootfs"

# chroot isolation: RUN steps need no OCI runtime or cgroups (this machine's hybrid cgroups defeat crun);
# Docker's image format, as `docker build` makes, keeps the HEALTHCHECK (OCI's has no such field).
build=("${podman[@]}" build --quiet --format docker --isolation chroot --network host --build-arg "BASE=localhost/check-image-base:$SUITE")
step "podman build --target full (Node and uv from PyPI)"
"${build[@]}" --target full -t localhost/prompt-gateway:full .
step "podman build (the default target: slim)"
"${build[@]}" -t localhost/prompt-gateway:slim .
"${podman[@]}" images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep prompt-gateway

# runc, with limits no higher than the host's own (the container may not raise them: no CAP_SYS_RESOURCE).
# The image's HEALTHCHECK is run by hand below (podman would schedule it with systemd, absent here).
run=("${podman[@]}" run --runtime runc --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)

step "the slim image serves its default config (the demo servers) and its HEALTHCHECK passes"
# (podman's complaints that systemd is not there to schedule the check go to podman.log, shown on failure)
served="$("${run[@]}" -d --network none -e PROMPT_GATEWAY_TOKEN=check-image-token-0123456789 \
  localhost/prompt-gateway:slim 2>"$work/podman.log")"
for _ in $(seq 60); do
  "${podman[@]}" healthcheck run "$served" >/dev/null 2>&1 && break
  sleep 1
done
if ! "${podman[@]}" healthcheck run "$served"; then
  "${podman[@]}" logs "$served" 2>&1 | tail -20
  cat "$work/podman.log"
  exit 1
fi
echo "healthy"
"${podman[@]}" stop --time 20 "$served" >/dev/null 2>>"$work/podman.log"
"${podman[@]}" rm "$served" >/dev/null 2>>"$work/podman.log"
run+=(--rm --network host --no-healthcheck)

step "the slim image has no Node; the full one has node, npx, uv, uvx and runs as uid 10001"
if "${run[@]}" --entrypoint sh localhost/prompt-gateway:slim -c 'command -v node || command -v npx || command -v uvx'; then
  echo "the slim image holds Node or uv" >&2
  exit 1
fi
# shellcheck disable=SC2016
"${run[@]}" --entrypoint sh localhost/prompt-gateway:full -c \
  'set -e; test "$(id -u)" = 10001; node --version; npx --version; uv --version; uvx --version'

# The upstreams' environment is minimal (docs/configuration.md): the CA bundle is named for them, which
# matters only behind a TLS-inspecting proxy and is harmless elsewhere. `check` waits up to timeout_s
# for each first start, which here includes the download of the server and its dependencies.
cat >"$work/check.toml" <<EOF
[[upstreams]]
namespace = "everything"
command = "npx"
args = ["-y", "$NPM_SERVER"]
env = { NODE_EXTRA_CA_CERTS = "/etc/ssl/certs/ca-certificates.crt" }
timeout_s = 120

[[upstreams]]
namespace = "fetch"
command = "uvx"
args = ["$PYPI_SERVER"]
env = { SSL_CERT_FILE = "/etc/ssl/certs/ca-certificates.crt" }
timeout_s = 120
EOF

step "prompt-gateway check, then list, in the full image: npx $NPM_SERVER and uvx $PYPI_SERVER"
# One container for both, so the second finds the packages the first downloaded (~/.npm, ~/.cache/uv).
"${run[@]}" -v "$work/check.toml:/etc/prompt-gateway/check.toml:ro" --entrypoint sh localhost/prompt-gateway:full -c \
  'prompt-gateway check --config /etc/prompt-gateway/check.toml && echo "-- list" \
   && prompt-gateway list --config /etc/prompt-gateway/check.toml' | tee "$work/out"
sed -n '/^-- list$/,$p' "$work/out" >"$work/list.out"
grep -Eq '^everything +stdio +ready' "$work/out"
grep -Eq '^fetch +stdio +ready' "$work/out"
for prompt in everything__simple-prompt everything__args-prompt fetch__fetch; do
  grep -q "^$prompt\b" "$work/list.out" || { echo "missing from the list: $prompt" >&2; exit 1; }
done
step "ok: the full image runs npx and uvx upstreams"
