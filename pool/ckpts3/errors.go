package ckpts3

import "errors"

// Errors of Open and of the configuration (wrapped with the operation).
var (
	// ErrBadURL: checkpoint_store is not s3://bucket[/prefix].
	ErrBadURL = errors.New("checkpoint_store must be s3://bucket[/prefix]")
	// ErrNoCredentials: neither the AWS variables nor a credentials file
	// give a key.
	ErrNoCredentials = errors.New("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a credentials file (AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials)")
	// ErrPlainHTTP: an http:// endpoint without the explicit opt-out.
	ErrPlainHTTP = errors.New("the S3 endpoint is plain http: set checkpoint_store_allow_http = true to send checkpoints and credentials unencrypted")
	// ErrNoBucket: the bucket does not exist (or the key may not see it).
	ErrNoBucket = errors.New("the bucket does not exist or is not visible with these credentials")
	// ErrObjectTooBig: an object larger than Config.MaxObjectBytes.
	ErrObjectTooBig = errors.New("checkpoint object over the size bound")
)
