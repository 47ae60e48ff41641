package api

import "github.com/go-chi/chi/v5"

// MountedRouter is the router behind the server's middleware: since
// observe runs in front of chi (it gives chi its route context), the
// handler is not the router itself.
func MountedRouter(s *Server) chi.Routes { return s.mux }
