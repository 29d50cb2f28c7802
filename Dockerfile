# The one veritrail binary, static, on a distroless base without a shell, as a non-root user.
#   docker build -t veritrail:dev .
# serve:    docker run -p 8080:8080 veritrail:dev serve --addr 0.0.0.0:8080 --data-dir /data
# the tiers: see deploy/compose/compose.yaml and deploy/helm/veritrail.

FROM golang:1.26 AS build
WORKDIR /src
# The modules first, so that a source change does not download them again. The plugin SDK is
# a module of its own that go.mod replaces with the copy beside it.
COPY go.mod go.sum ./
COPY plugins/sdk/go.mod plugins/sdk/go.sum plugins/sdk/
RUN go mod download
COPY . .
# SQLite is modernc's pure-Go port: no cgo, so the binary is static.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/veritrail ./cmd/veritrail

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/veritrail /usr/local/bin/veritrail
# 65532: distroless's nonroot user. /data is the embedded mode's data directory.
USER 65532:65532
WORKDIR /data
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/veritrail"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--data-dir", "/data"]
