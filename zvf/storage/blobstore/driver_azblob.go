//go:build !noazblob

package blobstore

import _ "gocloud.dev/blob/azureblob" // azblob://

// hasAzblob: this build reads azblob stores.
const hasAzblob = true
