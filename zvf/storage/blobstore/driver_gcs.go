//go:build !nogcs

package blobstore

// gs:// — Google's client library brings gRPC and protobuf with it, whose
// package initialisation is about half of this binary's start-up time; a
// build that reads no GCS can leave it out with -tags nogcs.
import _ "gocloud.dev/blob/gcsblob"

// hasGCS: this build reads gcs stores.
const hasGCS = true
