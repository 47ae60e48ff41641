//go:build noazblob

package blobstore

const hasAzblob = false
