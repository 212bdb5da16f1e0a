# crew: the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin/crew
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: all build demo test vet fuzz bench clean

all: build

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/crew

# A leader and three real worker processes coordinate a run on the Go
# module in testdata/demo, in a fresh temporary directory.
demo: build
	./scripts/demo.sh $(abspath $(BIN))

test:
	$(GO) vet ./...
	$(GO) test -count=1 ./...

clean:
	rm -rf bin
