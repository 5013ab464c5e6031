# kptr's Argo CD sidecar image. `make image` builds the same image without a
# daemon (deploy/image); both lay out their files with deploy/image, so the
# file tree is identical by construction and the config below mirrors
# deploy/image.Config() (a test compares them).
#
#   docker build -t ghcr.io/kptr-dev/kptr:dev --build-arg VERSION=dev .

FROM golang:1.26-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# Static cgo build (libcontainer's nsenter and runtime/launcher are C); the
# seccomp filter is kptr's own Go (runtime/seccomp), as in every build;
# netgo/osusergo keep glibc's NSS out of it. kptr-sigverify, the signature
# verifier kptr runs from beside itself, is pure Go.
RUN CGO_ENABLED=1 go build -tags netgo,osusergo -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -linkmode external -extldflags -static" \
      -o /out/kptr ./cmd/kptr \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/kptr-sigverify ./cmd/kptr-sigverify \
 && /out/kptr version \
 && go run ./deploy/image --kptr /out/kptr --sigverify /out/kptr-sigverify --plugin plugin.yaml \
      --ca-file /etc/ssl/certs/ca-certificates.crt --rootfs /rootfs

FROM scratch
COPY --from=build /rootfs/ /
USER 999:999
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENV HOME=/home/argocd
ENV KPTR_CACHE_DIR=/home/argocd/.cache/kptr
WORKDIR /home/argocd
VOLUME ["/tmp", "/home/argocd/.cache"]
LABEL org.opencontainers.image.title="kptr"
LABEL org.opencontainers.image.description="Argo CD config-management plugin rendering kpt packages with kptr"
LABEL org.opencontainers.image.source="https://github.com/kptr-dev/kptr"
# The sidecar does not use them: deploy/ sets its command to
# [kptr, init, --, /var/run/argocd/argocd-cmp-server] (kptr init is its pid 1
# and reaps orphans, which argocd-cmp-server does not: argoproj/argo-cd#29349).
ENTRYPOINT ["kptr"]
CMD ["doctor"]
