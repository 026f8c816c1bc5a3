package tlsconf

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
)

// loadKeyPair reads a certificate chain and its private key, decrypting
// the key with pass when it is encrypted. Its errors are Redis's.
func loadKeyPair(certFile, keyFile, pass string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("Failed to load certificate: %s: %v", certFile, errors.Unwrap(err))
	}
	if _, err := firstCert(certPEM); err != nil {
		return tls.Certificate{}, fmt.Errorf("Failed to load certificate: %s: %v", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("Failed to load private key: %s: %v", keyFile, errors.Unwrap(err))
	}
	if keyPEM, err = decryptKey(keyPEM, pass); err != nil {
		return tls.Certificate{}, fmt.Errorf("Failed to load private key: %s: %v", keyFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("Failed to load private key: %s: %v", keyFile, err)
	}
	return cert, nil
}

// firstCert checks that a file starts a chain with a parseable certificate.
func firstCert(b []byte) (*x509.Certificate, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PEM certificate in the file")
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

// decryptKey returns the first private key of a PEM file, decrypted with
// pass if it is encrypted, as PEM that tls.X509KeyPair reads. It knows
// PKCS#8 encryption with PBES2 (openssl genpkey, openssl pkcs8 -topk8, and
// OpenSSL 3's default) and the legacy "Proc-Type: 4,ENCRYPTED" headers
// (openssl rsa -aes256 in OpenSSL 1.x).
func decryptKey(b []byte, pass string) ([]byte, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PEM private key in the file")
		}
		if !strings.HasSuffix(blk.Type, "PRIVATE KEY") {
			continue
		}
		switch {
		case blk.Type == "ENCRYPTED PRIVATE KEY":
			if pass == "" {
				return nil, errors.New("the key is encrypted and no passphrase is set (tls-key-file-pass)")
			}
			der, err := decryptPKCS8(blk.Bytes, pass)
			if err != nil {
				return nil, err
			}
			return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
		case blk.Headers["Proc-Type"] == "4,ENCRYPTED":
			if pass == "" {
				return nil, errors.New("the key is encrypted and no passphrase is set (tls-key-file-pass)")
			}
			// Deprecated in Go for its weak design, but it is what
			// OpenSSL 1.x wrote: read here, never written.
			der, err := x509.DecryptPEMBlock(blk, []byte(pass))
			if err != nil {
				return nil, errors.New("bad decrypt: wrong passphrase or damaged key")
			}
			return pem.EncodeToMemory(&pem.Block{Type: blk.Type, Bytes: der}), nil
		}
		return pem.EncodeToMemory(blk), nil
	}
}

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

// RFC 5208 and RFC 8018 structures.
type encryptedPrivateKeyInfo struct {
	Algo          algorithmIdentifier
	EncryptedData []byte
}

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type pbes2Params struct {
	KeyDerivationFunc algorithmIdentifier
	EncryptionScheme  algorithmIdentifier
}

type pbkdf2Params struct {
	Salt           []byte
	IterationCount int
	KeyLength      int                 `asn1:"optional"`
	PRF            algorithmIdentifier `asn1:"optional"`
}

// maxIterations bounds PBKDF2's work: a key file asking for more is
// refused rather than stalling CONFIG SET.
const maxIterations = 10_000_000

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo protected by PBES2
// with PBKDF2 and AES-CBC or 3DES-CBC, and returns the PKCS#8 key.
func decryptPKCS8(der []byte, pass string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, errors.New("damaged encrypted key")
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("unsupported key encryption %v (PBES2 is supported)", info.Algo.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &params); err != nil {
		return nil, errors.New("damaged encrypted key")
	}
	if !params.KeyDerivationFunc.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("unsupported key derivation %v (PBKDF2 is supported)", params.KeyDerivationFunc.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KeyDerivationFunc.Parameters.FullBytes, &kdf); err != nil {
		return nil, errors.New("damaged encrypted key")
	}
	if kdf.IterationCount < 1 || kdf.IterationCount > maxIterations {
		return nil, fmt.Errorf("key derivation asks for %d iterations", kdf.IterationCount)
	}
	var prf func() hash.Hash
	switch alg := kdf.PRF.Algorithm; {
	case len(alg) == 0 || alg.Equal(oidHMACSHA1):
		prf = sha1.New
	case alg.Equal(oidHMACSHA224):
		prf = sha256.New224
	case alg.Equal(oidHMACSHA256):
		prf = sha256.New
	case alg.Equal(oidHMACSHA384):
		prf = sha512.New384
	case alg.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("unsupported key derivation hash %v", alg)
	}
	var keyLen int
	var newBlock func([]byte) (cipher.Block, error)
	switch alg := params.EncryptionScheme.Algorithm; {
	case alg.Equal(oidAES128CBC):
		keyLen, newBlock = 16, aes.NewCipher
	case alg.Equal(oidAES192CBC):
		keyLen, newBlock = 24, aes.NewCipher
	case alg.Equal(oidAES256CBC):
		keyLen, newBlock = 32, aes.NewCipher
	case alg.Equal(oidDESEDE3CBC):
		keyLen, newBlock = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("unsupported key cipher %v (AES-CBC and DES-EDE3-CBC are supported)", alg)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, errors.New("damaged encrypted key")
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.EncryptionScheme.Parameters.FullBytes, &iv); err != nil {
		return nil, errors.New("damaged encrypted key")
	}
	key, err := pbkdf2.Key(prf, pass, kdf.Salt, kdf.IterationCount, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := newBlock(key)
	if err != nil {
		return nil, err
	}
	data := info.EncryptedData
	if len(iv) != block.BlockSize() || len(data) == 0 || len(data)%block.BlockSize() != 0 {
		return nil, errors.New("damaged encrypted key")
	}
	out := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, data)
	// PKCS#7 padding; a wrong passphrase almost always breaks it, and the
	// parse below catches the rest.
	pad := int(out[len(out)-1])
	if pad == 0 || pad > block.BlockSize() {
		return nil, errors.New("bad decrypt: wrong passphrase or damaged key")
	}
	for _, p := range out[len(out)-pad:] {
		if int(p) != pad {
			return nil, errors.New("bad decrypt: wrong passphrase or damaged key")
		}
	}
	out = out[:len(out)-pad]
	if _, err := x509.ParsePKCS8PrivateKey(out); err != nil {
		return nil, errors.New("bad decrypt: wrong passphrase or damaged key")
	}
	return out, nil
}
