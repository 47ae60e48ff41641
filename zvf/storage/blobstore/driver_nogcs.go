//go:build nogcs

package blobstore

const hasGCS = false
