# Build a static binary, then ship it alone in a minimal image that runs as
# an unprivileged user. It listens on every interface, so it needs a
# password: LIMITKV_REQUIREPASS, LIMITKV_REQUIREPASS_FILE (a secret) or a
# mounted config with requirepass. Without one, protected mode refuses every
# client from outside the container (see docs/operations.md, "Docker").
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/limitkv ./cmd/limitkv \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/limitkv /usr/local/bin/limitkv
COPY --from=build --chown=nonroot:nonroot /out/data /data
USER nonroot:nonroot
VOLUME /data
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/limitkv", "--bind", "0.0.0.0", "--dir", "/data"]
