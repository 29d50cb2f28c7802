# Developer tasks. The tests need none of these: `go test ./...` is the one test command.

# Regenerate the notifier plugin contract's Go code (plugins/sdk/proto/*.pb.go) after changing
# plugins/sdk/proto/notifier.proto. Needs protoc (Debian: apt-get install protobuf-compiler); the
# generators are pinned to the versions that produced the committed code.
.PHONY: proto
proto:
	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
	PATH="$$(go env GOPATH)/bin:$$PATH" go generate ./plugins/sdk/proto
