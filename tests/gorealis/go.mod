module pelotonpy.test/gorealisdriver

go 1.21

require (
	github.com/apache/thrift v0.14.0
	github.com/paypal/gorealis v1.25.0
)

require (
	github.com/pkg/errors v0.9.1 // indirect
	github.com/samuel/go-zookeeper v0.0.0-20171117190445-471cd4e61d7a // indirect
)
