package proto

// Regenerate notifier.pb.go and notifier_grpc.pb.go after changing notifier.proto (needs protoc,
// protoc-gen-go and protoc-gen-go-grpc on PATH; `make proto` installs the generators).
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative notifier.proto
