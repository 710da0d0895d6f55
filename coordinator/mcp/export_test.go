package mcp

// DeclaredPNG is declaredPNG for the package's external tests.
var DeclaredPNG = declaredPNG
