// Package proto is the one contract between the Veritrail notify tier and notifier plugins:
// the gRPC service (notifier.proto and the code generated from it), the go-plugin handshake and
// the versioned plugin sets. Host and plugins both import it; it imports nothing else from the
// repository.
//
// Plugin authors do not use this package directly: plugins/sdk wraps it.
package proto

import (
	"context"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Handshake is shared by host and plugins. The cookie only tells a binary started by hand that
// it is a plugin (go-plugin prints a friendly message then); it is not a security measure: the
// catalog pins binaries by SHA-256 for that.
var Handshake = plugin.HandshakeConfig{
	MagicCookieKey:   "VERITRAIL_NOTIFIER_PLUGIN",
	MagicCookieValue: "5d1c6a3e0f2b4b8e9a7c1d2e3f405162",
}

// PluginName is the name under which every protocol version's plugin set serves the notifier.
const PluginName = "notifier"

// ProtocolVersion1 is the protocol of notifier.proto as it stands, and carries payload schema
// version 1. A breaking change adds ProtocolVersion2 and a second entry in PluginSets, so a host
// can keep serving plugins built against either.
const ProtocolVersion1 = 1

// PluginSets are the versioned plugin sets a host offers and a plugin serves. A plugin passes its
// server implementation; the host passes nil, since it only dispenses clients.
func PluginSets(server NotifierServer) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion1: {PluginName: &GRPCPlugin{Impl: server}},
	}
}

// GRPCPlugin serves a NotifierServer over gRPC on the plugin side and dispenses a NotifierClient
// on the host side. net/rpc is not supported.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl NotifierServer
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers the notifier service on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	RegisterNotifierServer(s, p.Impl)
	return nil
}

// GRPCClient returns a NotifierClient bound to the plugin's connection.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewNotifierClient(c), nil
}
