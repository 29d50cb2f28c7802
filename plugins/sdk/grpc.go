package sdk

import (
	"context"
	"errors"
	"fmt"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/veritrail/veritrail/plugins/sdk/proto"
)

// Serve runs n as a notifier plugin: it answers go-plugin's handshake, serves every protocol
// version in proto.PluginSets over gRPC, and returns only when the host ends the process.
// A plugin's main calls it and nothing else.
func Serve(n Notifier) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  proto.Handshake,
		VersionedPlugins: proto.PluginSets(NewServer(n)),
		GRPCServer:       plugin.DefaultGRPCServer,
	})
}

// NewServer adapts a Notifier to the gRPC service. Serve uses it; tests can too.
func NewServer(n Notifier) proto.NotifierServer {
	return &server{n: n}
}

type server struct {
	proto.UnimplementedNotifierServer
	n Notifier
}

func (s *server) Configure(ctx context.Context, req *proto.ConfigureRequest) (*proto.ConfigureResponse, error) {
	if err := s.n.Configure(ctx, req.GetSettings()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &proto.ConfigureResponse{}, nil
}

func (s *server) Notify(ctx context.Context, req *proto.NotifyRequest) (*proto.NotifyResponse, error) {
	n, err := notificationFromProto(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.n.Notify(ctx, n); err != nil {
		return &proto.NotifyResponse{Failure: failureToProto(Classify(err))}, nil
	}
	return &proto.NotifyResponse{}, nil
}

// NewClient adapts the host's end of a plugin connection to a Notifier. The host's catalog uses
// it; plugin authors do not need it.
//
// A failure the plugin reported comes back as the *Failure it classified. A failed call (the
// process died, the connection broke, the call timed out) comes back as a retryable *Failure
// with reason ReasonPluginFailure, ReasonTimeout or ReasonCanceled that wraps the gRPC status,
// so status.Code still finds the code.
func NewClient(c proto.NotifierClient) Notifier {
	return &client{c: c}
}

type client struct {
	c proto.NotifierClient
}

func (c *client) Configure(ctx context.Context, settings map[string]string) error {
	if _, err := c.c.Configure(ctx, &proto.ConfigureRequest{Settings: settings}); err != nil {
		if s, ok := status.FromError(err); ok && s.Code() == codes.InvalidArgument {
			return errors.New(s.Message())
		}
		return fmt.Errorf("configure call: %w", err)
	}
	return nil
}

func (c *client) Notify(ctx context.Context, n *Notification) error {
	resp, err := c.c.Notify(ctx, notificationToProto(n))
	if err != nil {
		err = fmt.Errorf("notify call: %w", err)
		switch status.Code(err) {
		case codes.DeadlineExceeded:
			return Retryable(ReasonTimeout, err)
		case codes.Canceled:
			return Retryable(ReasonCanceled, err)
		case codes.InvalidArgument:
			return Permanent(ReasonConfig, err)
		default:
			return Retryable(ReasonPluginFailure, err)
		}
	}
	if f := resp.GetFailure(); f != nil {
		return failureFromProto(f)
	}
	return nil
}
